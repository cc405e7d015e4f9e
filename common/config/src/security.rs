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
        }
    }

    /// Records what is wrong with `[security]`.
    pub fn check(&self, problems: &mut Problems) {
        if self.insecure {
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
    }
}
