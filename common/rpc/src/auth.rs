//! Who is calling: the role and node id in the caller's certificate, and the checks each
//! service makes at its edge before it changes anything.
//!
//! A rozone certificate names its holder twice: the subject CN (`om-2`, for people) and a
//! SAN URI `rozone://om/2` (for this code). Only the URI is trusted for decisions.
//!
//! On a plaintext server (`security.insecure = true`) there is no certificate and no check:
//! [`Caller::of`] returns `None` and every `require_*` passes. On a TLS server the handshake
//! already refused callers without a certificate from the cluster CA; a certificate from
//! the CA without a rozone identity is refused here as UNAUTHENTICATED, a wrong role or id
//! as PERMISSION_DENIED.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{LazyLock, Mutex};

use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use tonic::{Request, Status};

/// URI scheme of the identity SAN.
pub const IDENTITY_SCHEME: &str = "rozone://";

/// What a certificate's holder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// A member of the SCM ring.
    Scm,
    /// A member of the OM ring.
    Om,
    /// A datanode.
    Datanode,
    /// An S3 gateway.
    S3g,
    /// A user's client: namespace and key calls only.
    Client,
    /// An operator: everything a client may do, and the admin RPCs.
    Admin,
}

impl Role {
    /// Every role, in the order the docs list them.
    pub const ALL: [Role; 6] = [
        Role::Scm,
        Role::Om,
        Role::Datanode,
        Role::S3g,
        Role::Client,
        Role::Admin,
    ];

    /// The role's name in certificates and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Scm => "scm",
            Role::Om => "om",
            Role::Datanode => "datanode",
            Role::S3g => "s3g",
            Role::Client => "client",
            Role::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| {
                format!("unknown role {s:?}: want one of scm, om, datanode, s3g, client, admin")
            })
    }
}

/// The authenticated caller of a request: role and node id from its certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Caller {
    /// What it is.
    pub role: Role,
    /// Its node id (for `client` and `admin`, the number the certificate was issued with).
    pub id: u64,
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.role, self.id)
    }
}

impl Caller {
    /// The identity URI of this caller (`rozone://om/2`).
    pub fn uri(&self) -> String {
        format!("{IDENTITY_SCHEME}{}/{}", self.role, self.id)
    }

    /// Parses an identity URI (`rozone://om/2`).
    pub fn from_uri(uri: &str) -> Option<Caller> {
        let (role, id) = uri.strip_prefix(IDENTITY_SCHEME)?.split_once('/')?;
        Some(Caller {
            role: role.parse().ok()?,
            id: id.parse().ok()?,
        })
    }

    /// The identity a DER certificate carries in its SAN URI.
    pub fn from_der(der: &[u8]) -> Result<Caller, String> {
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| format!("unreadable certificate: {e}"))?;
        let san = cert
            .subject_alternative_name()
            .map_err(|e| format!("bad subjectAltName: {e}"))?;
        san.into_iter()
            .flat_map(|s| s.value.general_names.iter())
            .find_map(|n| match n {
                x509_parser::extensions::GeneralName::URI(u) => Caller::from_uri(u),
                _ => None,
            })
            .ok_or_else(|| {
                "the certificate carries no rozone identity (SAN URI rozone://ROLE/ID)".to_string()
            })
    }

    /// The caller of `req`: `Ok(None)` on a plaintext (insecure) server, the certificate's
    /// identity on a TLS one; UNAUTHENTICATED when a TLS caller has no usable identity.
    pub fn of<T>(req: &Request<T>) -> Result<Option<Caller>, Status> {
        let Some(tls) = req.extensions().get::<TlsConnectInfo<TcpConnectInfo>>() else {
            return Ok(None);
        };
        let certs = tls
            .peer_certs()
            .ok_or_else(|| Status::unauthenticated("no client certificate"))?;
        let first = certs
            .first()
            .ok_or_else(|| Status::unauthenticated("no client certificate"))?;
        identity(first.as_ref())
            .map(Some)
            .map_err(Status::unauthenticated)
    }
}

/// Most certificates [`identity`] remembers; past it, it forgets them all and starts again.
/// A node or client presents one certificate on every call of a connection, so a cluster's
/// few hundred callers fit.
const IDENTITIES_KEPT: usize = 1024;

/// What a certificate's DER bytes were read as.
type Identities = HashMap<Box<[u8]>, Result<Caller, String>>;

/// Identities of the certificates already read, by their DER bytes.
static IDENTITIES: LazyLock<Mutex<Identities>> = LazyLock::new(Default::default);

/// [`Caller::from_der`] of a certificate, read once per distinct certificate. Parsing the
/// X.509 structure on every call took ~5% of an OM leader's CPU under load (BENCHMARKS.md,
/// "2026-12-08: profiles with symbols"). Keyed by the whole DER, so a cached answer is exactly what parsing these
/// bytes gives; the handshake has already verified them, on every connection.
fn identity(der: &[u8]) -> Result<Caller, String> {
    let known = IDENTITIES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(der)
        .cloned();
    if let Some(known) = known {
        return known;
    }
    let read = Caller::from_der(der);
    let mut m = IDENTITIES.lock().unwrap_or_else(|e| e.into_inner());
    if m.len() >= IDENTITIES_KEPT {
        m.clear();
    }
    m.insert(der.into(), read.clone());
    read
}

/// Allows `req` only from one of `roles`; `what` names the call in the refusal.
pub fn require_role<T>(req: &Request<T>, roles: &[Role], what: &str) -> Result<(), Status> {
    match Caller::of(req)? {
        None => Ok(()),
        Some(c) if roles.contains(&c.role) => Ok(()),
        Some(c) => Err(Status::permission_denied(format!(
            "{what} is for {} certificates; the caller is {c}",
            names(roles)
        ))),
    }
}

/// Allows `req` only from the node `id` of role `role` (a datanode reporting for itself, a
/// ring member sending as itself); `what` names the call in the refusal.
pub fn require_node<T>(req: &Request<T>, role: Role, id: u64, what: &str) -> Result<(), Status> {
    match Caller::of(req)? {
        None => Ok(()),
        Some(c) if c.role == role && c.id == id => Ok(()),
        Some(c) => Err(Status::permission_denied(format!(
            "{what} as {role}-{id} needs that node's certificate; the caller is {c}"
        ))),
    }
}

fn names(roles: &[Role]) -> String {
    roles
        .iter()
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_uris_round_trip_and_reject_junk() {
        let c = Caller {
            role: Role::Om,
            id: 2,
        };
        assert_eq!(c.uri(), "rozone://om/2");
        assert_eq!(Caller::from_uri(&c.uri()), Some(c));
        assert_eq!(Caller::from_uri("rozone://root/1"), None);
        assert_eq!(Caller::from_uri("rozone://om/x"), None);
        assert_eq!(Caller::from_uri("http://om/1"), None);
        assert!("nobody".parse::<Role>().is_err());
    }

    #[test]
    fn identities_are_read_once_per_certificate_and_the_cache_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let want = Caller {
            role: Role::Om,
            id: 2,
        };
        crate::pki::init_ca(dir.path()).unwrap();
        let hosts = ["127.0.0.1".to_string()];
        let day = std::time::Duration::from_secs(86_400);
        let issued = crate::pki::issue(dir.path(), want, &hosts, dir.path(), day).unwrap();
        let pem = std::fs::read(&issued.cert).unwrap();
        let der = x509_parser::pem::parse_x509_pem(&pem).unwrap().1.contents;
        assert_eq!(identity(&der), Ok(want));
        assert_eq!(identity(&der), Ok(want), "answered from the cache");
        // Junk is refused the same way each time, and never grows the cache past its bound.
        for i in 0..(IDENTITIES_KEPT as u32 + 10) {
            assert!(identity(&i.to_be_bytes()).is_err());
        }
        assert!(IDENTITIES.lock().unwrap().len() <= IDENTITIES_KEPT);
        assert_eq!(
            identity(&der),
            Ok(want),
            "read again after the cache was cleared"
        );
    }

    #[test]
    fn a_plaintext_request_passes_every_check() {
        let req = Request::new(());
        assert_eq!(Caller::of(&req).unwrap(), None);
        require_role(&req, &[Role::Admin], "x").unwrap();
        require_node(&req, Role::Datanode, 3, "x").unwrap();
    }
}
