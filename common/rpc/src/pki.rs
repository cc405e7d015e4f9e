//! The cluster CA and the certificates it issues (`rozone admin ca init`,
//! `rozone admin cert issue`, `rozone dev up`), with rcgen: ECDSA P-256 keys, no OpenSSL.
//!
//! A CA directory holds `ca.crt` and `ca.key` (mode 0600). An issued certificate is
//! `ROLE-ID.crt` + `ROLE-ID.key` (0600) in the output directory, next to a copy of `ca.crt`:
//! the three files a process's `[security]` section names. Subject CN `ROLE-ID`, SAN URI
//! `rozone://ROLE/ID` (what [`crate::auth`] reads), and every host given as a DNS or IP SAN
//! (what a client checks against the address it dialled). Usable as server and client
//! certificate both: every rozone process is both.

use std::fs;
use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use time::OffsetDateTime;

use crate::auth::Caller;
use crate::error::RpcError;

/// The CA certificate's file name (in the CA directory and next to every issued cert).
pub const CA_CERT: &str = "ca.crt";
/// The CA key's file name (only in the CA directory).
pub const CA_KEY: &str = "ca.key";
/// How long a new CA is valid.
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// How long an issued certificate is valid unless asked otherwise.
pub const CERT_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);

fn err(what: impl std::fmt::Display, e: impl std::fmt::Display) -> RpcError {
    RpcError::Tls(format!("{what}: {e}"))
}

/// Files of one issued certificate.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The CA certificate (copied next to the certificate).
    pub ca_cert: PathBuf,
    /// The certificate.
    pub cert: PathBuf,
    /// Its private key (mode 0600).
    pub key: PathBuf,
}

/// Creates a new cluster CA in `dir` (created if missing). Refuses to overwrite one: every
/// certificate issued by the old CA would stop being trusted.
pub fn init_ca(dir: &Path) -> Result<PathBuf, RpcError> {
    let cert_path = dir.join(CA_CERT);
    if cert_path.exists() || dir.join(CA_KEY).exists() {
        return Err(RpcError::Invalid(format!(
            "{} already holds a CA: remove it first if you really mean to replace it (every certificate it issued stops being trusted)",
            dir.display()
        )));
    }
    fs::create_dir_all(dir).map_err(|e| err(format!("create {}", dir.display()), e))?;
    let key = KeyPair::generate().map_err(|e| err("generate the CA key", e))?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "rozone cluster CA");
    dn.push(DnType::OrganizationName, "rozone");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = SystemTime::now();
    params.not_before = OffsetDateTime::from(now - Duration::from_secs(60));
    params.not_after = OffsetDateTime::from(now + CA_VALIDITY);
    let cert = params
        .self_signed(&key)
        .map_err(|e| err("sign the CA certificate", e))?;
    write_private(&dir.join(CA_KEY), key.serialize_pem().as_bytes())?;
    write_public(&cert_path, cert.pem().as_bytes())?;
    Ok(cert_path)
}

/// Issues a certificate for `who`, valid for `hosts` (DNS names or IPs), from the CA in
/// `ca_dir`, valid from now for `validity`; writes it to `out` (created if missing).
/// Reissuing overwrites the old files (renewal: reissue, then restart the process).
pub fn issue(
    ca_dir: &Path,
    who: Caller,
    hosts: &[String],
    out: &Path,
    validity: Duration,
) -> Result<Issued, RpcError> {
    let now = SystemTime::now();
    issue_between(
        ca_dir,
        who,
        hosts,
        out,
        now - Duration::from_secs(60),
        now + validity,
    )
}

/// [`issue`] with an explicit validity window (tests issue already-expired certificates).
pub fn issue_between(
    ca_dir: &Path,
    who: Caller,
    hosts: &[String],
    out: &Path,
    not_before: SystemTime,
    not_after: SystemTime,
) -> Result<Issued, RpcError> {
    let ca_cert_path = ca_dir.join(CA_CERT);
    let ca_pem = fs::read_to_string(&ca_cert_path)
        .map_err(|e| err(format!("read {}", ca_cert_path.display()), e))?;
    let ca_key_path = ca_dir.join(CA_KEY);
    let ca_key_pem = fs::read_to_string(&ca_key_path)
        .map_err(|e| err(format!("read {}", ca_key_path.display()), e))?;
    let ca_key = KeyPair::from_pem(&ca_key_pem)
        .map_err(|e| err(format!("parse {}", ca_key_path.display()), e))?;
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key)
        .map_err(|e| err(format!("parse {}", ca_cert_path.display()), e))?;

    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, who.to_string());
    dn.push(DnType::OrganizationName, "rozone");
    dn.push(DnType::OrganizationalUnitName, who.role.as_str());
    params.distinguished_name = dn;
    let uri = who.uri().try_into().map_err(|e| err("identity URI", e))?;
    params.subject_alt_names.push(SanType::URI(uri));
    for h in hosts {
        let h = h.trim();
        if h.is_empty() {
            continue;
        }
        let san = match h.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(
                h.to_string()
                    .try_into()
                    .map_err(|e| err(format!("host {h:?}"), e))?,
            ),
        };
        params.subject_alt_names.push(san);
    }
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params.use_authority_key_identifier_extension = true;
    params.not_before = OffsetDateTime::from(not_before);
    params.not_after = OffsetDateTime::from(not_after);
    let key = KeyPair::generate().map_err(|e| err("generate a key", e))?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(|e| err("sign the certificate", e))?;

    fs::create_dir_all(out).map_err(|e| err(format!("create {}", out.display()), e))?;
    let name = who.to_string();
    let issued = Issued {
        ca_cert: out.join(CA_CERT),
        cert: out.join(format!("{name}.crt")),
        key: out.join(format!("{name}.key")),
    };
    write_private(&issued.key, key.serialize_pem().as_bytes())?;
    write_public(&issued.cert, cert.pem().as_bytes())?;
    if issued.ca_cert != ca_cert_path {
        write_public(&issued.ca_cert, ca_pem.as_bytes())?;
    }
    Ok(issued)
}

/// Writes a key readable by its owner only: created 0600, and forced to 0600 if it existed.
fn write_private(path: &Path, data: &[u8]) -> Result<(), RpcError> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| err(format!("write {}", path.display()), e))?;
    f.set_permissions(fs::Permissions::from_mode(0o600))
        .map_err(|e| err(format!("chmod {}", path.display()), e))?;
    f.write_all(data)
        .map_err(|e| err(format!("write {}", path.display()), e))
}

fn write_public(path: &Path, data: &[u8]) -> Result<(), RpcError> {
    fs::write(path, data).map_err(|e| err(format!("write {}", path.display()), e))
}
