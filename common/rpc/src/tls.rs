//! A process's TLS material, checked once at start, and the servers and channels built
//! from it.
//!
//! [`Security::load`] refuses to start with a message naming the file when: a file is
//! missing or unreadable; the key is readable by others than its owner (mode not 0600);
//! the certificate is not signed by the CA, not yet valid or expired; the key does not
//! belong to the certificate; or the certificate carries no rozone identity. Checking here
//! turns a handshake failure on every peer (hard to read) into one clear line at start.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::auth::Caller;
use crate::error::RpcError;
use crate::limits::ServerLimits;

/// Longest a TLS handshake on a server may take (a client that opens a socket and says
/// nothing is dropped after this).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The PEM files of one process, checked.
#[derive(Clone)]
pub struct TlsMaterial {
    /// The cluster CA certificate.
    pub ca_pem: Vec<u8>,
    /// This process's certificate.
    pub cert_pem: Vec<u8>,
    /// Its private key.
    pub key_pem: Vec<u8>,
    /// The identity the certificate carries.
    pub identity: Caller,
    /// When the certificate expires (seconds since the Unix epoch).
    pub not_after_unix: i64,
}

fn bad(key: &str, path: &Path, what: impl std::fmt::Display) -> RpcError {
    RpcError::Tls(format!("security.{key} {}: {what}", path.display()))
}

fn read(key: &str, path: &Path) -> Result<Vec<u8>, RpcError> {
    std::fs::read(path).map_err(|e| bad(key, path, e))
}

fn parse_pem(key: &str, path: &Path, pem: &[u8]) -> Result<Vec<u8>, RpcError> {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem)
        .map_err(|e| bad(key, path, format!("not a PEM certificate ({e})")))?;
    Ok(p.contents)
}

impl TlsMaterial {
    /// Reads and checks the CA certificate, this process's certificate and its key.
    pub fn load(ca_cert: &Path, cert: &Path, key: &Path) -> Result<Self, RpcError> {
        let ca_pem = read("ca_cert", ca_cert)?;
        let cert_pem = read("cert", cert)?;
        if let Some(why) = crate::pki::unsafe_key_mode(key).map_err(|e| bad("key", key, e))? {
            return Err(bad("key", key, why));
        }
        let key_pem = read("key", key)?;

        let ca_der = parse_pem("ca_cert", ca_cert, &ca_pem)?;
        let (_, ca) = X509Certificate::from_der(&ca_der)
            .map_err(|e| bad("ca_cert", ca_cert, format!("unreadable certificate ({e})")))?;
        if !ca.is_ca() {
            return Err(bad("ca_cert", ca_cert, "is not a CA certificate"));
        }
        let cert_der = parse_pem("cert", cert, &cert_pem)?;
        let (_, leaf) = X509Certificate::from_der(&cert_der)
            .map_err(|e| bad("cert", cert, format!("unreadable certificate ({e})")))?;
        leaf.verify_signature(Some(ca.public_key())).map_err(|_| {
            bad(
                "cert",
                cert,
                format!("is not signed by the cluster CA in {}", ca_cert.display()),
            )
        })?;
        let validity = leaf.validity();
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let (from, until) = (
            validity.not_before.timestamp(),
            validity.not_after.timestamp(),
        );
        if now < from {
            return Err(bad(
                "cert",
                cert,
                format!("is not valid before {}", validity.not_before),
            ));
        }
        if now > until {
            return Err(bad(
                "cert",
                cert,
                format!(
                    "expired on {} (reissue it: rozone admin cert issue)",
                    validity.not_after
                ),
            ));
        }
        let identity = Caller::from_der(&cert_der).map_err(|e| bad("cert", cert, e))?;
        let key_text = String::from_utf8_lossy(&key_pem);
        let pair = rcgen::KeyPair::from_pem(&key_text)
            .map_err(|e| bad("key", key, format!("not a PEM private key ({e})")))?;
        if rcgen::PublicKeyData::subject_public_key_info(&pair) != leaf.public_key().raw {
            return Err(bad(
                "key",
                key,
                format!("is not the key of the certificate {}", cert.display()),
            ));
        }
        Ok(Self {
            ca_pem,
            cert_pem,
            key_pem,
            identity,
            not_after_unix: until,
        })
    }
}

/// How this process talks to others: mutual TLS with its material, or plaintext when
/// started insecure. Cheap to clone.
#[derive(Clone)]
pub struct Security {
    material: Option<Arc<TlsMaterial>>,
    limits: ServerLimits,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.material {
            Some(m) => write!(f, "Security(mTLS as {})", m.identity),
            None => f.write_str("Security(insecure)"),
        }
    }
}

impl Security {
    /// Plaintext everywhere, every caller trusted: only when asked for explicitly.
    pub fn insecure() -> Self {
        Self {
            material: None,
            limits: ServerLimits::default(),
        }
    }

    /// Mutual TLS with checked files (see [`TlsMaterial::load`]).
    pub fn load(ca_cert: &Path, cert: &Path, key: &Path) -> Result<Self, RpcError> {
        Ok(Self {
            material: Some(Arc::new(TlsMaterial::load(ca_cert, cert, key)?)),
            limits: ServerLimits::default(),
        })
    }

    /// A daemon's `[security]` settings: plaintext when `insecure`, otherwise the three
    /// files loaded and checked. Call [`Security::announce`] once at start.
    pub fn from_settings(
        insecure: bool,
        ca_cert: &Path,
        cert: &Path,
        key: &Path,
    ) -> Result<Self, RpcError> {
        if insecure {
            return Ok(Self::insecure());
        }
        Self::load(ca_cert, cert, key)
    }

    /// The same security with these server limits (the daemon's `[rpc]` section).
    pub fn with_limits(mut self, limits: ServerLimits) -> Self {
        self.limits = limits;
        self
    }

    /// A fresh connection cap for one server of this process (`rpc.max_connections`):
    /// each server (port) counts its own connections.
    pub fn connection_cap(&self) -> crate::ConnectionCap {
        crate::ConnectionCap::new(self.limits.max_connections)
    }

    /// Refuses a certificate issued for another process (a copy-paste of the wrong file):
    /// a daemon's certificate must name its own role and node id.
    pub fn check_identity(&self, role: crate::Role, id: u64) -> Result<(), RpcError> {
        match self.identity() {
            Some(c) if c.role != role || c.id != id => Err(RpcError::Tls(format!(
                "security.cert is issued to {c}, but this process is {role}-{id}"
            ))),
            _ => Ok(()),
        }
    }

    /// Logs how this process's ports are secured: a loud warning when insecure.
    pub fn announce(&self, process: &str) {
        match &self.material {
            None => tracing::warn!(
                process,
                "INSECURE: security.insecure = true: every gRPC port is plaintext and trusts every caller; never run a real cluster like this"
            ),
            Some(m) => {
                let days = (m.not_after_unix - time::OffsetDateTime::now_utc().unix_timestamp())
                    / 86_400;
                tracing::info!(process, identity = %m.identity, expires_in_days = days, "mutual TLS on every gRPC port");
                if days < 30 {
                    tracing::warn!(process, expires_in_days = days, "the certificate expires soon: reissue it (rozone admin cert issue) and restart");
                }
            }
        }
    }

    /// Whether ports use mutual TLS.
    pub fn is_secure(&self) -> bool {
        self.material.is_some()
    }

    /// The identity of this process's certificate (`None` when insecure).
    pub fn identity(&self) -> Option<Caller> {
        self.material.as_ref().map(|m| m.identity)
    }

    /// The material, when secure.
    pub fn material(&self) -> Option<&TlsMaterial> {
        self.material.as_deref()
    }

    /// A server builder: requires a client certificate from the cluster CA when secure.
    pub fn server(&self) -> Result<Server, RpcError> {
        let b = self.limits.apply(Server::builder().tcp_nodelay(true));
        let Some(m) = &self.material else {
            return Ok(b);
        };
        let tls = ServerTlsConfig::new()
            .identity(Identity::from_pem(&m.cert_pem, &m.key_pem))
            .client_ca_root(Certificate::from_pem(&m.ca_pem))
            .timeout(HANDSHAKE_TIMEOUT);
        b.tls_config(tls)
            .map_err(|e| RpcError::Tls(format!("server TLS config: {e}")))
    }

    /// A server builder for the one port that serves callers without a certificate: the
    /// SCM's enrollment port, where a process redeems a join token for its first
    /// certificate. TLS with this process's certificate (the caller checks it against the
    /// cluster CA), no client certificate asked for. `None` when insecure: an insecure
    /// cluster has no certificates to hand out.
    pub fn enroll_server(&self) -> Result<Option<Server>, RpcError> {
        let Some(m) = &self.material else {
            return Ok(None);
        };
        let tls = ServerTlsConfig::new()
            .identity(Identity::from_pem(&m.cert_pem, &m.key_pem))
            .timeout(HANDSHAKE_TIMEOUT);
        let b = self.limits.apply(Server::builder().tcp_nodelay(true));
        b.tls_config(tls)
            .map(Some)
            .map_err(|e| RpcError::Tls(format!("enrollment server TLS config: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::pki;
    use crate::Role;
    use std::os::unix::fs::PermissionsExt;

    const DAY: Duration = Duration::from_secs(86_400);

    fn om(id: u64) -> Caller {
        Caller { role: Role::Om, id }
    }

    fn err(r: Result<Security, RpcError>) -> String {
        match r {
            Ok(_) => panic!("loaded"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn issued_certificates_load_with_their_identity() {
        let d = tempfile::tempdir().unwrap();
        let ca = d.path().join("ca");
        pki::init_ca(&ca).unwrap();
        let out = d.path().join("out");
        let i = pki::issue(&ca, om(2), &["127.0.0.1".into(), "om2".into()], &out, DAY).unwrap();
        let mode = std::fs::metadata(&i.key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let s = Security::load(&i.ca_cert, &i.cert, &i.key).unwrap();
        assert_eq!(s.identity(), Some(om(2)));
        s.check_identity(Role::Om, 2).unwrap();
        let wrong = s.check_identity(Role::Om, 3).unwrap_err().to_string();
        assert_eq!(
            wrong,
            "security.cert is issued to om-2, but this process is om-3"
        );
        // A second CA in the same place is refused: it would orphan every certificate.
        assert!(pki::init_ca(&ca)
            .unwrap_err()
            .to_string()
            .contains("already holds a CA"));
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let d = tempfile::tempdir().unwrap();
        let (ca, other) = (d.path().join("ca"), d.path().join("other"));
        pki::init_ca(&ca).unwrap();
        pki::init_ca(&other).unwrap();
        let good = pki::issue(&ca, om(1), &[], &d.path().join("good"), DAY).unwrap();
        let foreign = pki::issue(&other, om(1), &[], &d.path().join("foreign"), DAY).unwrap();
        let now = SystemTime::now();
        let expired = pki::issue_between(
            &ca,
            om(1),
            &[],
            &d.path().join("expired"),
            now - 10 * DAY,
            now - DAY,
        )
        .unwrap();

        let missing = d.path().join("nope.crt");
        assert!(err(Security::load(&missing, &good.cert, &good.key))
            .starts_with(&format!("security.ca_cert {}: ", missing.display())));
        assert!(
            err(Security::load(&good.ca_cert, &foreign.cert, &foreign.key))
                .contains("is not signed by the cluster CA")
        );
        assert!(
            err(Security::load(&good.ca_cert, &expired.cert, &expired.key)).contains("expired on")
        );
        assert!(err(Security::load(&good.ca_cert, &good.cert, &foreign.key))
            .contains("is not the key of the certificate"));
        std::fs::set_permissions(&good.key, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(err(Security::load(&good.ca_cert, &good.cert, &good.key))
            .contains("mode 0644 lets others read the key; want 0600"));
        // The leaf is no CA: it cannot stand in for one.
        assert!(err(Security::load(&good.cert, &good.cert, &foreign.key))
            .contains("is not a CA certificate"));
    }
}
