//! The `[security]` section every daemon has: mutual TLS with the cluster CA, or plaintext
//! when asked for explicitly. The files are read and checked at start (rozone-rpc's
//! `Security`), not here: this crate stays free of TLS code, and `--config-check` on a
//! machine without the files still checks the rest.

use std::path::PathBuf;

use crate::Problems;

crate::config_struct! {
    /// Mutual TLS on every gRPC port (see docs/security.md).
    pub struct SecuritySection {
        /// Plaintext gRPC that trusts every caller. Only for throwaway test
        /// clusters: anyone who reaches a port can then delete blocks, join
        /// rings and read every database. Logged loudly at start.
        pub insecure: bool = false,
        /// The cluster CA certificate (PEM): peers must present a certificate
        /// it signed.
        pub ca_cert: PathBuf = PathBuf::from("/etc/rozone/tls/ca.crt"),
        /// This process's certificate (PEM), issued by the cluster CA with
        /// `rozone admin cert issue`; it carries the role and node id.
        pub cert: PathBuf = PathBuf::from("/etc/rozone/tls/node.crt"),
        /// The certificate's private key (PEM); must be mode 0600.
        pub key: PathBuf = PathBuf::from("/etc/rozone/tls/node.key"),
        /// A one-time join token (`rozone admin join-token create`): when cert and key
        /// do not exist yet, the process makes a key, redeems the token at an SCM's
        /// enrollment port for its certificate, writes both and starts. Ignored once
        /// the files exist. ca_cert must already be in place.
        pub join_token: String = String::new(),
        /// host:port of the SCMs' enrollment listeners (scm.enroll_addr, 9961), for
        /// join_token.
        pub enroll_addrs: Vec<String> = vec![],
        /// DNS names and IPs the certificate from join_token is valid for. Empty:
        /// this machine's host name, localhost, 127.0.0.1 and ::1.
        pub cert_hosts: Vec<String> = vec![],
    }
}

impl SecuritySection {
    /// Plaintext: for tests that are not about security.
    pub fn insecure() -> Self {
        Self {
            insecure: true,
            ..Self::default()
        }
    }

    /// The files of a certificate issued into `dir` for `name` (`om-2`), next to `ca.crt`.
    pub fn in_dir(dir: &std::path::Path, name: &str) -> Self {
        Self {
            insecure: false,
            ca_cert: dir.join("ca.crt"),
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
            ..Self::default()
        }
    }

    /// Records what is wrong with `[security]`.
    pub fn check(&self, problems: &mut Problems) {
        if self.insecure {
            problems.check(self.join_token.is_empty(), || {
                "security.join_token is set but security.insecure = true: an insecure process needs no certificate".into()
            });
            return;
        }
        for (key, path) in [
            ("security.ca_cert", &self.ca_cert),
            ("security.cert", &self.cert),
            ("security.key", &self.key),
        ] {
            problems.check(!path.as_os_str().is_empty(), || {
                format!("{key} must name a file (or set security.insecure = true)")
            });
        }
        if !self.join_token.is_empty() {
            problems.check(!self.enroll_addrs.is_empty(), || {
                "security.join_token needs security.enroll_addrs (the SCMs' scm.enroll_addr, port 9961)".into()
            });
        }
    }
}
