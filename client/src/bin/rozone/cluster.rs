//! Which cluster a command talks to: `--om`/`--scm` address lists win, then `--config
//! FILE`, then the file named by `ROZONE_CONFIG`.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use rozone_client::{Client, ClientConfig};

/// Flags naming the cluster.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// Client config file (as `rozone dev up` writes: DIR/client.toml).
    #[arg(long, global = true, value_name = "FILE", env = "ROZONE_CONFIG")]
    pub config: Option<PathBuf>,

    /// OM client addresses, comma-separated or repeated (host:port).
    #[arg(
        long = "om",
        global = true,
        value_name = "HOST:PORT",
        value_delimiter = ','
    )]
    pub om: Vec<String>,

    /// SCM client addresses, comma-separated or repeated (host:port).
    #[arg(
        long = "scm",
        global = true,
        value_name = "HOST:PORT",
        value_delimiter = ','
    )]
    pub scm: Vec<String>,

    /// Give up on a call after this long (e.g. 30s, 2m).
    #[arg(long, global = true, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub timeout: Option<std::time::Duration>,

    /// The cluster CA certificate (overrides the config's ca_cert).
    #[arg(long, global = true, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,

    /// This client's certificate, role client or admin (overrides the config's cert).
    #[arg(long, global = true, value_name = "FILE")]
    pub cert: Option<PathBuf>,

    /// Its private key, mode 0600 (overrides the config's key).
    #[arg(long, global = true, value_name = "FILE")]
    pub key: Option<PathBuf>,

    /// Plaintext without certificates: only for a cluster started insecure.
    #[arg(long, global = true)]
    pub insecure: bool,
}

impl ClusterArgs {
    /// The client config these flags describe.
    pub fn config(&self) -> anyhow::Result<ClientConfig> {
        let mut c = match &self.config {
            Some(path) => {
                if !path.exists() {
                    bail!(
                        "config file {} not found (start a local cluster with `rozone dev up`, or give --om/--scm)",
                        path.display()
                    );
                }
                ClientConfig::load(path)?
            }
            None => ClientConfig::default(),
        };
        if !self.om.is_empty() {
            c.om_addrs = self.om.clone();
        }
        if !self.scm.is_empty() {
            c.scm_addrs = self.scm.clone();
        }
        if let Some(t) = self.timeout {
            c.call_deadline = t;
        }
        if self.insecure {
            c.insecure = true;
        }
        for (flag, field) in [
            (&self.ca_cert, &mut c.ca_cert),
            (&self.cert, &mut c.cert),
            (&self.key, &mut c.key),
        ] {
            if flag.is_some() {
                field.clone_from(flag);
            }
        }
        if c.om_addrs.is_empty() && c.scm_addrs.is_empty() {
            bail!("no cluster given: use --config FILE, set ROZONE_CONFIG, or give --om/--scm addresses");
        }
        c.check()?;
        Ok(c)
    }

    /// A client of that cluster.
    pub fn client(&self) -> anyhow::Result<Client> {
        let c = self.config()?;
        Client::new(&c).context("cluster config")
    }
}
