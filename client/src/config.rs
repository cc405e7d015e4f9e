//! Where the cluster is: `client.toml` (written by `rozone dev up`, or by hand), and the
//! timeouts calls use. Unknown keys are errors, so a typo is not silently ignored.
//!
//! ```toml
//! om_addrs = ["127.0.0.1:9862", "127.0.0.1:9863"]
//! scm_addrs = ["127.0.0.1:9860"]
//! call_deadline = "30s"      # optional: one call, every retry included
//! attempt_timeout = "10s"    # optional: one attempt on one member
//! ca_cert = "/etc/rozone/tls/ca.crt"      # mutual TLS: the cluster CA,
//! cert = "/etc/rozone/tls/admin-1.crt"    # this client's certificate (role client or admin)
//! key = "/etc/rozone/tls/admin-1.key"     # and its key (mode 0600)
//! # insecure = true                       # or plaintext, for an insecure cluster only
//! s3_endpoint = "http://127.0.0.1:9878"   # optional: the S3 gateway, for S3 tools
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{ClientError, Result};
use rozone_rpc::channel::host_port;
use rozone_rpc::{RetryPolicy, Security};

/// The client's view of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    /// Client addresses (`host:port`) of the OM ring's members.
    #[serde(default)]
    pub om_addrs: Vec<String>,
    /// Client addresses (`host:port`) of the SCM ring's members.
    #[serde(default)]
    pub scm_addrs: Vec<String>,
    /// One call, every retry included.
    #[serde(default = "default_deadline", with = "humantime_serde")]
    pub call_deadline: Duration,
    /// One attempt on one member.
    #[serde(default = "default_attempt", with = "humantime_serde")]
    pub attempt_timeout: Duration,
    /// Plaintext, trusting the servers blindly: only for a cluster run insecure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// The cluster CA certificate (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<PathBuf>,
    /// This client's certificate (PEM), role `client` or `admin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<PathBuf>,
    /// Its private key (PEM, mode 0600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
    /// The S3 gateway's endpoint (`http://host:port`), for S3 tools; `rozone dev up`
    /// writes it. The CLI itself does not use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_endpoint: Option<String>,
}

fn default_deadline() -> Duration {
    RetryPolicy::default().deadline
}

fn default_attempt() -> Duration {
    RetryPolicy::default().attempt_timeout
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            om_addrs: Vec::new(),
            scm_addrs: Vec::new(),
            call_deadline: default_deadline(),
            attempt_timeout: default_attempt(),
            insecure: false,
            ca_cert: None,
            cert: None,
            key: None,
            s3_endpoint: None,
        }
    }
}

impl ClientConfig {
    /// Reads and checks a `client.toml`.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ClientError::io(format!("read config {}", path.display()), e))?;
        let c: ClientConfig = toml::from_str(&text).map_err(|e| {
            ClientError::Invalid(format!("config {}: {}", path.display(), e.message().trim()))
        })?;
        c.check()?;
        Ok(c)
    }

    /// Every address parses as `host:port`.
    pub fn check(&self) -> Result<()> {
        for a in self.om_addrs.iter().chain(&self.scm_addrs) {
            host_port(a)?;
        }
        if self.call_deadline.is_zero() || self.attempt_timeout.is_zero() {
            return Err(ClientError::Invalid(
                "call_deadline and attempt_timeout must be above 0".into(),
            ));
        }
        Ok(())
    }

    /// How this client connects: mutual TLS with `ca_cert`/`cert`/`key` (checked now), or
    /// plaintext when `insecure`; an error naming what to set otherwise.
    pub fn security(&self) -> Result<Security> {
        if self.insecure {
            return Ok(Security::insecure());
        }
        match (&self.ca_cert, &self.cert, &self.key) {
            (Some(ca), Some(cert), Some(key)) => Ok(Security::load(ca, cert, key)?),
            _ => Err(ClientError::Invalid(
                "no client certificate: set ca_cert, cert and key in the client config (rozone dev up writes them; rozone admin cert issue makes them) or give --ca-cert/--cert/--key; insecure = true / --insecure only for an insecure cluster".into(),
            )),
        }
    }

    /// The TOML text of this config.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// The retry policy calls use.
    pub fn policy(&self) -> RetryPolicy {
        RetryPolicy {
            deadline: self.call_deadline,
            attempt_timeout: self.attempt_timeout.min(self.call_deadline),
            ..RetryPolicy::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_unknown_keys_and_bad_addresses() {
        let c = ClientConfig {
            om_addrs: vec!["127.0.0.1:1".into()],
            scm_addrs: vec!["h:2".into()],
            ..ClientConfig::default()
        };
        let back: ClientConfig = toml::from_str(&c.to_toml()).expect("parse");
        assert_eq!(back, c);
        assert!(toml::from_str::<ClientConfig>("om_adrs = []").is_err());
        let bad = ClientConfig {
            om_addrs: vec!["nohost".into()],
            ..ClientConfig::default()
        };
        assert!(bad.check().unwrap_err().to_string().contains("nohost"));
    }
}
