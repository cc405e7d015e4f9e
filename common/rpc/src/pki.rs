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

impl Issued {
    /// The files of `who`'s certificate in `dir`: `ROLE-ID.crt`, `ROLE-ID.key`, `ca.crt`.
    pub fn in_dir(dir: &Path, who: Caller) -> Self {
        Self {
            ca_cert: dir.join(CA_CERT),
            cert: dir.join(format!("{who}.crt")),
            key: dir.join(format!("{who}.key")),
        }
    }
}

/// Why a private key file's mode is unsafe (others may read it), or `None` when it is
/// readable by its owner only.
pub(crate) fn unsafe_key_mode(path: &Path) -> std::io::Result<Option<String>> {
    let mode = fs::metadata(path)?.permissions().mode() & 0o777;
    Ok((mode & 0o077 != 0).then(|| {
        format!(
            "mode {mode:04o} lets others read the key; want 0600 (chmod 600 {})",
            path.display()
        )
    }))
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
    let ca = Ca::load(&ca_dir.join(CA_CERT), &ca_dir.join(CA_KEY))?;
    let key = KeyPair::generate().map_err(|e| err("generate a key", e))?;
    let cert_pem = ca.sign(who, hosts, &key, not_before, not_after)?;
    let issued = Issued::in_dir(out, who);
    write_issued(
        &issued,
        &key.serialize_pem(),
        &cert_pem,
        (issued.ca_cert != ca_dir.join(CA_CERT)).then_some(ca.cert_pem()),
    )?;
    Ok(issued)
}

/// Writes a certificate's files (the key 0600), creating their directory; the CA
/// certificate too when given.
pub fn write_issued(
    issued: &Issued,
    key_pem: &str,
    cert_pem: &str,
    ca_pem: Option<&str>,
) -> Result<(), RpcError> {
    for p in [&issued.cert, &issued.key, &issued.ca_cert] {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|e| err(format!("create {}", dir.display()), e))?;
        }
    }
    write_private(&issued.key, key_pem.as_bytes())?;
    write_public(&issued.cert, cert_pem.as_bytes())?;
    if let Some(ca) = ca_pem {
        write_public(&issued.ca_cert, ca.as_bytes())?;
    }
    Ok(())
}

/// The cluster CA loaded for signing: the SCM holds one when it issues certificates to
/// holders of join tokens (`scm.ca_key`), `rozone admin cert issue` for one certificate.
pub struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    /// Reads the CA certificate and its key; refuses a key others may read or one that is
    /// not the certificate's.
    pub fn load(ca_cert: &Path, ca_key: &Path) -> Result<Self, RpcError> {
        let pem = fs::read_to_string(ca_cert)
            .map_err(|e| err(format!("read {}", ca_cert.display()), e))?;
        if let Some(why) =
            unsafe_key_mode(ca_key).map_err(|e| err(format!("read {}", ca_key.display()), e))?
        {
            return Err(err(format!("{}", ca_key.display()), why));
        }
        let key_pem =
            fs::read_to_string(ca_key).map_err(|e| err(format!("read {}", ca_key.display()), e))?;
        let key = KeyPair::from_pem(&key_pem)
            .map_err(|e| err(format!("parse {}", ca_key.display()), e))?;
        let issuer = Issuer::from_ca_cert_pem(&pem, key)
            .map_err(|e| err(format!("parse {}", ca_cert.display()), e))?;
        let ca = Self { pem, issuer };
        ca.check_key(ca_cert, ca_key)?;
        Ok(ca)
    }

    /// A certificate signed with a key that is not the CA certificate's would be trusted by
    /// nobody: refuse at load, not at the first handshake.
    fn check_key(&self, ca_cert: &Path, ca_key: &Path) -> Result<(), RpcError> {
        let (_, p) = x509_parser::pem::parse_x509_pem(self.pem.as_bytes())
            .map_err(|e| err(format!("parse {}", ca_cert.display()), e))?;
        let cert = p
            .parse_x509()
            .map_err(|e| err(format!("parse {}", ca_cert.display()), e))?;
        let spki = rcgen::PublicKeyData::subject_public_key_info(self.issuer.key());
        if spki != cert.public_key().raw {
            return Err(err(
                format!("{}", ca_key.display()),
                format!("is not the key of {}", ca_cert.display()),
            ));
        }
        Ok(())
    }

    /// The CA certificate (PEM).
    pub fn cert_pem(&self) -> &str {
        &self.pem
    }

    /// Signs a certificate for `who` and `hosts` over `public_key`, valid in the window.
    pub fn sign(
        &self,
        who: Caller,
        hosts: &[String],
        public_key: &impl rcgen::PublicKeyData,
        not_before: SystemTime,
        not_after: SystemTime,
    ) -> Result<String, RpcError> {
        let params = leaf_params(who, hosts, not_before, not_after)?;
        let cert = params
            .signed_by(public_key, &self.issuer)
            .map_err(|e| err("sign the certificate", e))?;
        Ok(cert.pem())
    }

    /// Signs a certificate for `who` and `hosts`, valid for `validity` from now, over the
    /// key of a certificate signing request (DER). The request's signature proves that its
    /// sender holds the key; everything else in it (names, extensions) is ignored: the
    /// identity comes from the caller (a redeemed join token), never from the request.
    pub fn sign_request(
        &self,
        csr_der: &[u8],
        who: Caller,
        hosts: &[String],
        validity: Duration,
    ) -> Result<String, RpcError> {
        let csr = rcgen::CertificateSigningRequestParams::from_der(&csr_der.to_vec().into())
            .map_err(|e| RpcError::Invalid(format!("bad certificate signing request: {e}")))?;
        let now = SystemTime::now();
        self.sign(
            who,
            hosts,
            &csr.public_key,
            now - Duration::from_secs(60),
            now + validity,
        )
    }
}

/// Checks what an enrolling process sent before its join token is spent on it: the
/// signing request parses and is signed by its key, and every host makes a valid SAN.
pub fn check_request(csr_der: &[u8], hosts: &[String]) -> Result<(), RpcError> {
    rcgen::CertificateSigningRequestParams::from_der(&csr_der.to_vec().into())
        .map_err(|e| RpcError::Invalid(format!("bad certificate signing request: {e}")))?;
    let who = Caller {
        role: crate::Role::Client,
        id: 1,
    };
    let now = SystemTime::now();
    leaf_params(who, hosts, now, now + Duration::from_secs(1)).map(drop)
}

/// A new key and a certificate signing request over it (DER), for enrolling with a join
/// token: the key never leaves the process that made it.
pub fn new_request() -> Result<(KeyPair, Vec<u8>), RpcError> {
    let key = KeyPair::generate().map_err(|e| err("generate a key", e))?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "rozone join");
    params.distinguished_name = dn;
    let csr = params
        .serialize_request(&key)
        .map_err(|e| err("make a certificate signing request", e))?;
    Ok((key, csr.der().to_vec()))
}

/// The certificate of a rozone process: its identity as CN and SAN URI, its hosts as
/// DNS/IP SANs, usable as server and client certificate.
fn leaf_params(
    who: Caller,
    hosts: &[String],
    not_before: SystemTime,
    not_after: SystemTime,
) -> Result<CertificateParams, RpcError> {
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
            Err(_) if !is_dns_name(h) => {
                return Err(RpcError::Invalid(format!(
                "host {h:?} is neither an IP address nor a DNS name (letters, digits, '-' and '.')"
            )))
            }
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
    Ok(params)
}

/// A host name as DNS allows it: dot-separated labels of 1 to 63 letters, digits and '-',
/// neither starting nor ending with '-', at most 253 bytes in all.
fn is_dns_name(h: &str) -> bool {
    h.len() <= 253
        && h.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
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
