//! A process without a certificate getting one with a one-time join token
//! (docs/security.md, "Join tokens"): it makes a key, sends a signing request over it with
//! the token to an SCM's enrollment port, and gets back a certificate of the role and id
//! the admin named when making the token. The key never leaves the process.
//!
//! The enrollment port is TLS with the SCM's certificate; this side checks it against the
//! cluster CA it was given (`security.ca_cert`, copied to the machine: it is public), so a
//! token is never handed to an impostor. The returned certificate is checked too (signed by
//! that CA, the identity expected) before anything is written.

use std::path::Path;

use rozone_config::SecuritySection;
use rozone_proto::scm::scm_enroll_client::ScmEnrollClient;
use rozone_proto::scm::EnrollRequest;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::error::RpcError;
use crate::pki::{self, Issued};
use crate::{Caller, ChannelFactory, RetryPolicy, Ring, Role};

/// What an enrollment returns: the new key and its certificate (PEM), and who it names.
pub struct Enrolled {
    pub key_pem: String,
    pub cert_pem: String,
    pub identity: Caller,
}

/// Redeems `token` at one of `enroll_addrs` (the leader is found as for any ring call) for
/// a certificate valid for `hosts`, trusting only the CA in `ca_pem`.
pub async fn enroll(
    ca_pem: &[u8],
    enroll_addrs: &[String],
    token: &str,
    hosts: &[String],
) -> Result<Enrolled, RpcError> {
    let (key, csr_der) = pki::new_request()?;
    let ring = Ring::new(
        "SCM enrollment",
        enroll_addrs,
        RetryPolicy::default(),
        ChannelFactory::server_auth_only(ca_pem),
    )?;
    let request = EnrollRequest {
        token: token.trim().to_string(),
        csr_der,
        hosts: hosts.to_vec(),
    };
    let reply = ring
        .call("Enroll", |ch| {
            let request = request.clone();
            async move { ScmEnrollClient::new(ch).enroll(request).await }
        })
        .await?;
    let identity = check_issued(ca_pem, reply.cert_pem.as_bytes())?;
    Ok(Enrolled {
        key_pem: key.serialize_pem(),
        cert_pem: reply.cert_pem,
        identity,
    })
}

/// The identity of a certificate the SCM returned, after checking that the trusted CA
/// signed it.
fn check_issued(ca_pem: &[u8], cert_pem: &[u8]) -> Result<Caller, RpcError> {
    let bad = |what: String| RpcError::Tls(format!("the SCM returned {what}"));
    let der = |pem: &[u8], what: &str| {
        x509_parser::pem::parse_x509_pem(pem)
            .map(|(_, p)| p.contents)
            .map_err(|e| bad(format!("an unreadable {what}: {e}")))
    };
    let ca_der = der(ca_pem, "CA certificate")?;
    let leaf_der = der(cert_pem, "certificate")?;
    let (_, ca) = X509Certificate::from_der(&ca_der)
        .map_err(|e| bad(format!("an unreadable CA certificate: {e}")))?;
    let (_, leaf) = X509Certificate::from_der(&leaf_der)
        .map_err(|e| bad(format!("an unreadable certificate: {e}")))?;
    leaf.verify_signature(Some(ca.public_key()))
        .map_err(|_| bad("a certificate the cluster CA did not sign".into()))?;
    Caller::from_der(&leaf_der).map_err(|e| bad(format!("a certificate without identity: {e}")))
}

/// The host names a certificate gets when none are configured: this machine's name,
/// localhost and the loopback addresses.
pub fn default_hosts() -> Vec<String> {
    let mut hosts = Vec::new();
    if let Ok(name) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let name = name.trim();
        if !name.is_empty() && name != "localhost" {
            hosts.push(name.to_string());
        }
    }
    hosts.extend(["localhost", "127.0.0.1", "::1"].map(String::from));
    hosts
}

/// At a daemon's start, before its security is loaded: when `security.join_token` is set
/// and the certificate or key file does not exist, enrolls for `role`-`id` and writes the
/// key (0600) and certificate. Returns whether it enrolled. Refuses, writing nothing, when
/// only one of the two files exists (a half-made pair is the operator's to sort out) or
/// when the token was made for another process.
pub async fn ensure_certificate(
    s: &SecuritySection,
    role: Role,
    id: u64,
) -> Result<bool, RpcError> {
    if s.insecure || s.join_token.is_empty() {
        return Ok(false);
    }
    match (s.cert.exists(), s.key.exists()) {
        (true, true) => {
            tracing::info!(
                cert = %s.cert.display(),
                "security.join_token ignored: the certificate exists (remove the token from the config)"
            );
            return Ok(false);
        }
        (false, false) => {}
        _ => {
            return Err(RpcError::Tls(format!(
                "security.join_token: only one of {} and {} exists; remove it to enroll again",
                s.cert.display(),
                s.key.display()
            )))
        }
    }
    let ca_pem = std::fs::read(&s.ca_cert).map_err(|e| {
        RpcError::Tls(format!(
            "security.join_token needs the cluster CA certificate: security.ca_cert {}: {e}",
            s.ca_cert.display()
        ))
    })?;
    let hosts = if s.cert_hosts.is_empty() {
        default_hosts()
    } else {
        s.cert_hosts.clone()
    };
    let got = enroll(&ca_pem, &s.enroll_addrs, &s.join_token, &hosts).await?;
    let want = Caller { role, id };
    if got.identity != want {
        return Err(RpcError::Tls(format!(
            "security.join_token was made for {}, but this process is {want}: nothing written",
            got.identity
        )));
    }
    let issued = Issued {
        ca_cert: s.ca_cert.clone(),
        cert: s.cert.clone(),
        key: s.key.clone(),
    };
    pki::write_issued(&issued, &got.key_pem, &got.cert_pem, None)?;
    tracing::info!(identity = %want, cert = %s.cert.display(), ?hosts, "certificate issued for the join token");
    Ok(true)
}

/// Writes an enrolled certificate as `rozone admin cert issue` would: `ROLE-ID.crt` and
/// `ROLE-ID.key` (0600) in `out`, next to a copy of the CA certificate.
pub fn write_enrolled(out: &Path, ca_pem: &[u8], got: &Enrolled) -> Result<Issued, RpcError> {
    let issued = Issued::in_dir(out, got.identity);
    let ca = std::str::from_utf8(ca_pem)
        .map_err(|_| RpcError::Tls("the CA certificate is not text".into()))?;
    let same_ca = std::fs::read(&issued.ca_cert).is_ok_and(|c| c == ca_pem);
    pki::write_issued(
        &issued,
        &got.key_pem,
        &got.cert_pem,
        (!same_ca).then_some(ca),
    )?;
    Ok(issued)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::pki::{Ca, CA_CERT, CA_KEY};

    #[test]
    fn a_signed_request_becomes_a_checked_certificate_of_the_given_identity() {
        let dir = tempfile::tempdir().unwrap();
        pki::init_ca(dir.path()).unwrap();
        let ca = Ca::load(&dir.path().join(CA_CERT), &dir.path().join(CA_KEY)).unwrap();
        let (key, csr) = pki::new_request().unwrap();
        let who = Caller {
            role: Role::Datanode,
            id: 4,
        };
        let hosts = vec!["dn4.example".to_string(), "127.0.0.1".to_string()];
        pki::check_request(&csr, &hosts).unwrap();
        let pem = ca
            .sign_request(&csr, who, &hosts, Duration::from_secs(3600))
            .unwrap();
        let ca_pem = ca.cert_pem().as_bytes();
        assert_eq!(check_issued(ca_pem, pem.as_bytes()).unwrap(), who);
        // The files load as a process's TLS material (key matches, CA signed).
        let got = Enrolled {
            key_pem: key.serialize_pem(),
            cert_pem: pem,
            identity: who,
        };
        let out = dir.path().join("out");
        let issued = write_enrolled(&out, ca_pem, &got).unwrap();
        let m = crate::tls::TlsMaterial::load(&issued.ca_cert, &issued.cert, &issued.key).unwrap();
        assert_eq!(m.identity, who);

        // Another CA's certificate is refused.
        let other = tempfile::tempdir().unwrap();
        pki::init_ca(other.path()).unwrap();
        let other_pem = std::fs::read(other.path().join(CA_CERT)).unwrap();
        assert!(check_issued(&other_pem, got.cert_pem.as_bytes()).is_err());
        // Junk requests and hosts are refused before a token would be spent.
        assert!(pki::check_request(b"junk", &hosts).is_err());
        assert!(pki::check_request(&csr, &["bad host!".to_string()]).is_err());
    }

    #[test]
    fn a_ca_key_others_may_read_or_of_another_ca_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        pki::init_ca(a.path()).unwrap();
        pki::init_ca(b.path()).unwrap();
        let e = Ca::load(&a.path().join(CA_CERT), &b.path().join(CA_KEY))
            .err()
            .unwrap();
        assert!(e.to_string().contains("is not the key of"), "{e}");
        let key = a.path().join(CA_KEY);
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Ca::load(&a.path().join(CA_CERT), &key).err().unwrap();
        assert!(e.to_string().contains("0644"), "{e}");
    }
}
