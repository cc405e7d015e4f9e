//! `rozone admin ca init` and `rozone admin cert issue`: the cluster CA and the
//! certificates of its processes (docs/security.md), from local files; `rozone admin cert
//! enroll`: a certificate for a join token, from an SCM's enrollment port.

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
    /// Redeem a one-time join token (`rozone admin join-token create`) at an SCM's
    /// enrollment port: writes OUT/ROLE-ID.crt, OUT/ROLE-ID.key (0600; made here, never
    /// sent) and OUT/ca.crt. Needs no certificate, only the cluster's CA certificate.
    Enroll {
        /// The token (or set ROZONE_JOIN_TOKEN, which keeps it out of the process list).
        #[arg(long, env = "ROZONE_JOIN_TOKEN", hide_env_values = true)]
        token: String,
        /// host:port of an SCM's enrollment listener (repeat or comma-separate).
        #[arg(long = "enroll-addr", value_delimiter = ',', required = true)]
        enroll_addrs: Vec<String>,
        /// The cluster CA certificate: the SCM must present a certificate it signed.
        #[arg(long)]
        ca_cert: PathBuf,
        /// Host names and IPs the certificate is valid for (repeat or comma-separate).
        #[arg(long = "host", value_delimiter = ',')]
        hosts: Vec<String>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum JoinTokenCommand {
    /// Make a one-time token that a process without a certificate redeems (with
    /// `--join-token` at its first start, or `rozone admin cert enroll`) for a
    /// certificate of this role and id. Printed once: the SCM keeps only its hash.
    Create {
        /// scm, om, datanode, s3g, client or admin.
        #[arg(long)]
        role: Role,
        /// The node id the certificate will carry (the daemon's node.id).
        #[arg(long)]
        id: u64,
        /// How long it may be redeemed (at most 7 days).
        #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
        ttl: Duration,
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

pub async fn cert(cmd: CertCommand) -> anyhow::Result<()> {
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
        CertCommand::Enroll {
            token,
            enroll_addrs,
            ca_cert,
            hosts,
            out,
        } => {
            let ca_pem = std::fs::read(&ca_cert)
                .map_err(|e| anyhow::anyhow!("--ca-cert {}: {e}", ca_cert.display()))?;
            let got = rozone_rpc::enroll::enroll(&ca_pem, &enroll_addrs, &token, &hosts).await?;
            let issued = rozone_rpc::enroll::write_enrolled(&out, &ca_pem, &got)?;
            println!(
                "# {}\n[security]\nca_cert = {:?}\ncert = {:?}\nkey = {:?}",
                got.identity,
                issued.ca_cert.display().to_string(),
                issued.cert.display().to_string(),
                issued.key.display().to_string()
            );
        }
    }
    Ok(())
}
