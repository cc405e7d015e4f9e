//! The `rozone-om` config: `[node]`, `[om]`, `[raft]`, `[http]`, `[log]`
//! and the ring's `[[peers]]`.

use std::net::SocketAddr;
use std::time::Duration;

use rozone_config::{
    check_host_ports, check_listen_addrs, check_peers, config_struct, listen_on, ByteSize,
    ConfigError, DaemonConfig, HttpSection, LogFormat, LogSection, NodeSection, Peer, Problems,
    RaftSection, RpcSection, SecuritySection,
};

config_struct! {
    /// The OM's own listeners and the SCM ring it gets blocks from.
    pub struct OmSection {
        /// Client gRPC listener: namespace and key operations.
        pub client_addr: SocketAddr = listen_on(9862),
        /// Raft listener for the OM ring (also serves DB checkpoints to
        /// joining OMs); only ring members should reach it.
        pub peer_addr: SocketAddr = listen_on(9872),
        /// Client addresses (host:port) of the SCM ring's members; any one
        /// that answers points the OM at the leader.
        pub scm_addrs: Vec<String> = vec!["127.0.0.1:9860".into()],
        /// How long a call to the SCM (block allocation, block deletion) may
        /// take in all, retries on other SCMs included.
        #[serde(with = "rozone_config::duration")]
        pub scm_timeout: Duration = Duration::from_secs(20),
        /// Block size the OM asks the SCM for when it sizes an open key
        /// (blocks = key size / block size, rounded up).
        pub block_size: ByteSize = ByteSize::mib(256),
        /// The most blocks one open key, allocation or commit may carry:
        /// larger requests are refused as too large.
        pub max_blocks_per_key: u32 = 1024,
        /// An open key not committed within this time is removed (and its
        /// blocks given back); allocating a block extends it.
        #[serde(with = "rozone_config::duration")]
        pub open_key_expiry: Duration = Duration::from_secs(7 * 24 * 3600),
        /// A writer of at most one block of up to 1 MiB (it says so) is opened
        /// without a log entry: its commit records the open key and the key in
        /// one entry, so a small key costs one replicated write instead of two.
        /// Off: every open is its own entry.
        pub deferred_open: bool = true,
        /// An S3 multipart upload neither completed nor aborted this long
        /// after it was created is aborted by the leader (its parts' blocks
        /// are deleted), as S3's AbortIncompleteMultipartUpload rule does.
        #[serde(with = "rozone_config::duration")]
        pub s3_upload_expiry: Duration = Duration::from_secs(7 * 24 * 3600),
        /// How long the block tokens the OM hands out with key writes and lookups
        /// stay valid (capped by the SCM's scm.block_token_max_lifetime). A block
        /// transfer still running after this is refused by the datanode (the
        /// client retries it with a fresh lookup or allocation, as after any
        /// datanode failure).
        #[serde(with = "rozone_config::duration")]
        pub block_token_lifetime: Duration = Duration::from_secs(3600),
        /// How often the leader looks for expired open keys and uploads and
        /// for deleted blocks to hand to the SCM.
        #[serde(with = "rozone_config::duration")]
        pub cleanup_interval: Duration = Duration::from_secs(60),
        /// Largest gRPC request the client port accepts.
        pub max_request_size: ByteSize = ByteSize::mib(4),
        /// LOCAL_LEASE reads: off by default. When on, a follower answers a
        /// LOCAL_LEASE read from its own state if it knows its leader, heard
        /// from it within local_lease_time, and is within local_lease_log_limit
        /// entries of the leader's commit index (which must be from the
        /// leader's current term).
        pub local_lease_enabled: bool = false,
        /// LOCAL_LEASE: the longest time since the last append from the leader
        /// a follower may still serve with; a request may ask for less.
        #[serde(with = "rozone_config::duration")]
        pub local_lease_time: Duration = Duration::from_secs(5),
        /// LOCAL_LEASE: how many entries a follower's applied index may be
        /// behind the leader's commit index; -1 skips only this comparison
        /// (the leader, lease and term checks still apply). A request may ask
        /// for less.
        pub local_lease_log_limit: i64 = 10_000,
        /// --bootstrap: attempts to reach the leader to be added before
        /// giving up.
        pub bootstrap_attempts: u32 = 30,
        /// --bootstrap: pause between those attempts.
        #[serde(with = "rozone_config::duration")]
        pub bootstrap_retry_pause: Duration = Duration::from_secs(1),
    }
}

/// What this start was asked to do besides running: set by `--init`,
/// `--bootstrap` and `--force`, never by a config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Startup {
    /// Create a new OM ring with this node as its first member.
    pub init: bool,
    /// Join an existing OM ring as a new member.
    pub bootstrap: bool,
    /// With `bootstrap`: skip the check that every existing member already
    /// lists this node in its config.
    pub force: bool,
}

impl Startup {
    /// The start the shared join procedure decides for.
    pub fn mode(&self) -> rozone_raft::join::StartMode {
        rozone_raft::join::StartMode::from_flags(self.init, self.bootstrap)
    }
}

config_struct! {
    /// Configuration of one `rozone-om` process.
    pub struct Config {
        /// This node's identity and data directory.
        pub node: NodeSection = NodeSection::in_dir("/var/lib/rozone/om"),
        /// OM listeners and SCM addresses.
        pub om: OmSection = OmSection::default(),
        /// Raft timing and log compaction of the OM ring.
        pub raft: RaftSection = RaftSection::default(),
        /// The /metrics, /health and /ready endpoint.
        pub http: HttpSection = HttpSection::on(9874),
        /// Log layout.
        pub log: LogSection = LogSection::default(),
        /// Mutual TLS on every gRPC port, or (explicitly) plaintext.
        pub security: SecuritySection = SecuritySection::default(),
        /// Limits of every gRPC server of this process.
        pub rpc: RpcSection = RpcSection::default(),
        /// Members of the OM ring, this node included; --bootstrap needs
        /// an address for every one. Replace `peers = []` with one table
        /// per member:
        ///   [[peers]]
        ///   id = 1
        ///   peer_addr = "om1.example.com:9872"
        ///   client_addr = "om1.example.com:9862"
        /// Empty: a ring of this node alone.
        pub peers: Vec<Peer> = Vec::new(),
    }
    runtime {
        /// `--init` / `--bootstrap` / `--force`.
        pub startup: Startup = Startup::default(),
    }
}

impl DaemonConfig for Config {
    fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Problems::default();
        self.node.check(&mut problems);
        self.security.check(&mut problems);
        self.rpc.check(&mut problems);
        self.raft.check(&mut problems);
        check_peers(&self.peers, self.node.id, &mut problems);
        check_host_ports("om.scm_addrs", &self.om.scm_addrs, &mut problems);
        let om = &self.om;
        problems.check(om.local_lease_log_limit >= -1, || {
            format!(
                "om.local_lease_log_limit ({}) must be -1 (no index comparison) or at least 0",
                om.local_lease_log_limit
            )
        });
        problems.check(!om.local_lease_time.is_zero(), || {
            "om.local_lease_time must be above 0".to_string()
        });
        problems.check(om.max_blocks_per_key > 0, || {
            "om.max_blocks_per_key must be at least 1".to_string()
        });
        problems.check(om.block_size.as_u64() > 0, || {
            "om.block_size must be above 0".to_string()
        });
        problems.check(!om.open_key_expiry.is_zero(), || {
            "om.open_key_expiry must be above 0".to_string()
        });
        problems.check(!om.s3_upload_expiry.is_zero(), || {
            "om.s3_upload_expiry must be above 0".to_string()
        });
        problems.check(!om.block_token_lifetime.is_zero(), || {
            "om.block_token_lifetime must be above 0".to_string()
        });
        problems.check(!om.cleanup_interval.is_zero(), || {
            "om.cleanup_interval must be above 0".to_string()
        });
        problems.check(om.bootstrap_attempts > 0, || {
            "om.bootstrap_attempts must be at least 1".to_string()
        });
        problems.check(om.max_request_size.as_u64() >= 64 * 1024, || {
            "om.max_request_size must be at least 64KiB".to_string()
        });
        check_listen_addrs(
            &[
                ("om.client_addr", self.om.client_addr),
                ("om.peer_addr", self.om.peer_addr),
                ("http.addr", self.http.addr),
            ],
            &mut problems,
        );
        problems.into_result()
    }

    fn log_format(&self) -> LogFormat {
        self.log.format
    }
}

impl Config {
    /// This process's TLS material (or plaintext when `security.insecure`), checked: the
    /// files, and that the certificate names this om's node id.
    pub fn security(&self) -> anyhow::Result<rozone_rpc::Security> {
        let s = &self.security;
        let sec = rozone_rpc::Security::from_settings(s.insecure, &s.ca_cert, &s.cert, &s.key)?
            .with_limits(rozone_rpc::ServerLimits::from(&self.rpc));
        sec.check_identity(rozone_rpc::Role::Om, self.node.id)?;
        Ok(sec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declaration_is_documented_and_sample_round_trips() {
        rozone_config::testing::assert_config_declaration_sound::<Config>();
    }

    #[test]
    fn defaults_are_ozones_ports() {
        let c = Config::default();
        let ports = [
            c.om.client_addr.port(),
            c.om.peer_addr.port(),
            c.http.addr.port(),
        ];
        assert_eq!(ports, [9862, 9872, 9874]);
    }

    #[test]
    fn lease_log_limit_below_minus_one_is_refused() {
        let mut c = Config::default();
        c.om.local_lease_log_limit = -2;
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "om.local_lease_log_limit (-2) must be -1 (no index comparison) or at least 0"
        );
        c.om.local_lease_log_limit = -1;
        assert!(c.validate().is_ok());
    }

    #[test]
    fn scm_addresses_are_required() {
        let mut c = Config::default();
        c.om.scm_addrs.clear();
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "om.scm_addrs must list at least one host:port"
        );
    }
}
