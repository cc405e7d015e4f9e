//! `rozone admin ca init` and `rozone admin cert issue`: the cluster CA and the
//! certificates of its processes (docs/security.md). Local files only: no cluster is
//! contacted.

use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;
use rozone_rpc::pki;
use rozone_rpc::{Caller, Role};

#[derive(Debug, Subcommand)]
pub enum CaCommand {
    /// Create the cluster CA: DIR/ca.crt and DIR/ca.key (0600). Keep ca.key offline.
    Init {
        /// Directory for the CA files (created if missing; refused if it holds a CA).
        #[arg(long)]
        dir: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum CertCommand {
    /// Issue a certificate: OUT/ROLE-ID.crt, OUT/ROLE-ID.key (0600) and OUT/ca.crt.
    /// Renewal: issue again (the files are replaced) and restart the process.
    Issue {
        /// The CA directory (`rozone admin ca init --dir`).
        #[arg(long)]
        ca_dir: PathBuf,
        /// scm, om, datanode, s3g, client or admin.
        #[arg(long)]
        role: Role,
        /// The node id (the daemon's node.id; any number for client and admin).
        #[arg(long)]
        id: u64,
        /// Host names and IPs the process is reached at (repeat or comma-separate).
        #[arg(long = "host", value_delimiter = ',')]
        hosts: Vec<String>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// Days the certificate is valid.
        #[arg(long, default_value_t = 365)]
        days: u64,
    },
}

pub fn ca(cmd: CaCommand) -> anyhow::Result<()> {
    match cmd {
        CaCommand::Init { dir } => {
            let cert = pki::init_ca(&dir)?;
            println!(
                "CA certificate {}; its key {} (mode 0600: keep it off the cluster's machines)",
                cert.display(),
                dir.join(pki::CA_KEY).display()
            );
        }
    }
    Ok(())
}

pub fn cert(cmd: CertCommand) -> anyhow::Result<()> {
    match cmd {
        CertCommand::Issue {
            ca_dir,
            role,
            id,
            hosts,
            out,
            days,
        } => {
            if days == 0 {
                anyhow::bail!("--days must be at least 1");
            }
            let validity = Duration::from_secs(days.saturating_mul(24 * 3600));
            let issued = pki::issue(&ca_dir, Caller { role, id }, &hosts, &out, validity)?;
            println!(
                "[security]\nca_cert = {:?}\ncert = {:?}\nkey = {:?}",
                issued.ca_cert.display().to_string(),
                issued.cert.display().to_string(),
                issued.key.display().to_string()
            );
        }
    }
    Ok(())
}
