//! The dev cluster's mutual TLS: a CA in `DIR/tls/ca/` and a certificate for every daemon
//! (role and node id of the daemon, SANs 127.0.0.1 and localhost) and one `admin-1` for
//! the CLI, in `DIR/tls/`. Created on the first start; a restart reuses them and only
//! issues what is missing (a daemon added by an older dev cluster, an expired-soon one is
//! not renewed: delete `DIR/tls` and the data to start over).

use std::path::{Path, PathBuf};

use rozone_client::ClientConfig;
use rozone_rpc::{pki, Caller, Role};

use super::layout::{Kind, Layout, Node};

/// Where the dev cluster's certificates are.
pub struct DevTls {
    dir: PathBuf,
}

fn role(kind: Kind) -> Role {
    match kind {
        Kind::Scm => Role::Scm,
        Kind::Om => Role::Om,
        Kind::Datanode => Role::Datanode,
        Kind::S3g => Role::S3g,
    }
}

/// The identity of the dev cluster's CLI.
const ADMIN: Caller = Caller {
    role: Role::Admin,
    id: 1,
};

impl DevTls {
    /// Creates the CA and every missing certificate under `dir/tls`.
    pub fn ensure(dir: &Path, layout: &Layout) -> anyhow::Result<Self> {
        let tls = dir.join("tls");
        let ca = tls.join("ca");
        if !ca.join(pki::CA_CERT).exists() {
            pki::init_ca(&ca)?;
        }
        let hosts = ["127.0.0.1".to_string(), "localhost".to_string()];
        let who = layout
            .nodes
            .iter()
            .map(|n| Caller {
                role: role(n.kind),
                id: n.id,
            })
            .chain(std::iter::once(ADMIN));
        for c in who {
            if !tls.join(format!("{c}.crt")).exists() {
                pki::issue(&ca, c, &hosts, &tls, pki::CERT_VALIDITY)?;
            }
        }
        Ok(Self { dir: tls })
    }

    fn files(&self, c: Caller) -> (PathBuf, PathBuf, PathBuf) {
        (
            self.dir.join(pki::CA_CERT),
            self.dir.join(format!("{c}.crt")),
            self.dir.join(format!("{c}.key")),
        )
    }

    /// The `[security]` section of `node`'s config.
    pub fn section(&self, node: &Node) -> String {
        let (ca, cert, key) = self.files(Caller {
            role: role(node.kind),
            id: node.id,
        });
        format!(
            "[security]\nca_cert = {:?}\ncert = {:?}\nkey = {:?}\n",
            ca.display().to_string(),
            cert.display().to_string(),
            key.display().to_string()
        )
    }

    /// The `[scm]` lines that let an SCM issue certificates for join tokens: the dev
    /// cluster's CA key and an enrollment port.
    pub fn scm_enroll_lines(&self, port: u16) -> String {
        let key = self.dir.join("ca").join(pki::CA_KEY);
        format!(
            "enroll_addr = \"127.0.0.1:{port}\"\nca_key = {:?}\n",
            key.display().to_string()
        )
    }

    /// The cluster CA certificate.
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join(pki::CA_CERT)
    }

    /// `client` presenting the CLI's admin certificate.
    pub fn client(&self, mut client: ClientConfig) -> ClientConfig {
        let (ca, cert, key) = self.files(ADMIN);
        client.ca_cert = Some(ca);
        client.cert = Some(cert);
        client.key = Some(key);
        client
    }
}
