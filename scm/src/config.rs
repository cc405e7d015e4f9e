//! The `rozone-scm` config: `[node]`, `[scm]`, `[raft]`, `[http]`, `[log]`
//! and the ring's `[[peers]]`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use rozone_config::{
    check_listen_addrs, check_peers, config_struct, listen_on, ByteSize, ConfigError, DaemonConfig,
    HttpSection, LogFormat, LogSection, NodeSection, Peer, Problems, RaftSection, RpcSection,
    SecuritySection,
};

config_struct! {
    /// The SCM's own listeners and how it sizes containers and blocks.
    pub struct ScmSection {
        /// Client gRPC listener: admin commands, OM block allocation and
        /// datanode heartbeats.
        pub client_addr: SocketAddr = listen_on(9860),
        /// Raft listener for the SCM ring; only ring members should reach it.
        pub peer_addr: SocketAddr = listen_on(9894),
        /// Serves DB checkpoints to SCMs joining the ring with --bootstrap.
        pub checkpoint_addr: SocketAddr = listen_on(9895),
        /// Enrollment listener (Ozone's SCM security port): processes without a
        /// certificate redeem a join token here for one. TLS, no client certificate.
        /// Bound only when ca_key is set.
        pub enroll_addr: SocketAddr = listen_on(9961),
        /// The cluster CA's private key (PEM, mode 0600; its certificate is
        /// security.ca_cert). Set it to let this SCM issue certificates to holders of
        /// join tokens (`rozone admin join-token create`); every SCM of the ring should
        /// then have it. Empty: no enrollment port, join tokens refused.
        pub ca_key: PathBuf = PathBuf::new(),
        /// Size at which a container stops taking blocks and is closed.
        pub container_size: ByteSize = ByteSize::gib(5),
        /// Size of the blocks the SCM hands out; at most container_size.
        pub block_size: ByteSize = ByteSize::mib(256),
        /// --bootstrap: attempts to download the leader's checkpoint before giving up
        /// (a joining SCM never joins without it).
        pub bootstrap_attempts: u32 = 10,
        /// --bootstrap: pause between checkpoint download attempts.
        #[serde(with = "rozone_config::duration")]
        pub bootstrap_retry_pause: Duration = Duration::from_secs(1),
        /// A datanode silent this long is STALE: no new pipelines or blocks on it.
        #[serde(with = "rozone_config::duration")]
        pub datanode_stale_after: Duration = Duration::from_secs(60),
        /// A datanode silent this long is DEAD: its pipelines are closed and its replicas
        /// no longer count (it must register again). More than datanode_stale_after.
        #[serde(with = "rozone_config::duration")]
        pub datanode_dead_after: Duration = Duration::from_secs(300),
        /// Open pipelines a datanode may be a member of.
        pub max_pipelines_per_datanode: u32 = 2,
        /// OPEN containers per owner kept on each pipeline for block allocation.
        pub open_containers_per_pipeline: u32 = 3,
        /// How often the leader's ReplicationManager checks every closed container.
        #[serde(with = "rozone_config::duration")]
        pub replication_interval: Duration = Duration::from_secs(30),
        /// A replicate or delete command not seen done after this is forgotten (and may
        /// be sent again).
        #[serde(with = "rozone_config::duration")]
        pub replication_inflight_timeout: Duration = Duration::from_secs(300),
        /// How often pending deleted-block transactions are sent to datanodes; one not
        /// executed after replication_inflight_timeout is sent again.
        #[serde(with = "rozone_config::duration")]
        pub block_deletion_interval: Duration = Duration::from_secs(10),
        /// Safe mode ends when this share (0..1) of CLOSED/QUASI_CLOSED containers has a
        /// healthy reported replica...
        pub safe_mode_threshold: f64 = 0.99,
        /// ...and at least this many datanodes are registered and healthy.
        pub safe_mode_min_datanodes: u32 = 1,
        /// How long one block-token secret key signs: the leader makes the next key
        /// a tenth of this before the current one's period ends (docs/security.md).
        #[serde(with = "rozone_config::duration")]
        pub block_token_key_rotation: Duration = Duration::from_secs(86_400),
        /// The longest a block token may live: a key is kept (for verifying) this long
        /// after its signing period ends, then forgotten. OMs cap their tokens to it.
        #[serde(with = "rozone_config::duration")]
        pub block_token_max_lifetime: Duration = Duration::from_secs(3600),
    }
}

/// What this start was asked to do besides running: set by `--init` and
/// `--bootstrap`, never by a config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Startup {
    /// Create a new SCM ring with this node as its first member.
    pub init: bool,
    /// Join an existing ring, taking its state from the leader's checkpoint.
    pub bootstrap: bool,
}

impl Startup {
    /// The start the shared join procedure decides for.
    pub fn mode(&self) -> rozone_raft::join::StartMode {
        rozone_raft::join::StartMode::from_flags(self.init, self.bootstrap)
    }
}

config_struct! {
    /// Configuration of one `rozone-scm` process.
    pub struct Config {
        /// This node's identity and data directory.
        pub node: NodeSection = NodeSection::in_dir("/var/lib/rozone/scm"),
        /// SCM listeners and sizing.
        pub scm: ScmSection = ScmSection::default(),
        /// Raft timing and log compaction of the SCM ring.
        pub raft: RaftSection = RaftSection::default(),
        /// The /metrics, /health and /ready endpoint.
        pub http: HttpSection = HttpSection::on(9876),
        /// Log layout.
        pub log: LogSection = LogSection::default(),
        /// Mutual TLS on every gRPC port, or (explicitly) plaintext.
        pub security: SecuritySection = SecuritySection::default(),
        /// Limits of every gRPC server of this process.
        pub rpc: RpcSection = RpcSection::default(),
        /// Members of the SCM ring, this node included. Replace `peers = []`
        /// with one table per member:
        ///   [[peers]]
        ///   id = 1
        ///   peer_addr = "scm1.example.com:9894"
        ///   client_addr = "scm1.example.com:9860"
        /// Empty: a ring of this node alone.
        pub peers: Vec<Peer> = Vec::new(),
    }
    runtime {
        /// `--init` / `--bootstrap`.
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
        let scm = &self.scm;
        let enrolls = !scm.ca_key.as_os_str().is_empty();
        let mut listeners = vec![
            ("scm.client_addr", scm.client_addr),
            ("scm.peer_addr", scm.peer_addr),
            ("scm.checkpoint_addr", scm.checkpoint_addr),
            ("http.addr", self.http.addr),
        ];
        if enrolls {
            listeners.push(("scm.enroll_addr", scm.enroll_addr));
        }
        check_listen_addrs(&listeners, &mut problems);
        problems.check(!(enrolls && self.security.insecure), || {
            "scm.ca_key is set but security.insecure = true: an insecure cluster issues no certificates".into()
        });
        problems.check(scm.bootstrap_attempts > 0, || {
            "scm.bootstrap_attempts must be at least 1".into()
        });
        problems.check(scm.datanode_stale_after < scm.datanode_dead_after, || {
            format!(
                "scm.datanode_stale_after ({:?}) must be less than scm.datanode_dead_after ({:?})",
                scm.datanode_stale_after, scm.datanode_dead_after
            )
        });
        problems.check(
            scm.block_token_key_rotation >= Duration::from_secs(10),
            || "scm.block_token_key_rotation must be at least 10s".into(),
        );
        problems.check(!scm.block_token_max_lifetime.is_zero(), || {
            "scm.block_token_max_lifetime must be above 0".into()
        });
        problems.check(!scm.datanode_stale_after.is_zero(), || {
            "scm.datanode_stale_after must be above 0".into()
        });
        problems.check((0.0..=1.0).contains(&scm.safe_mode_threshold), || {
            format!(
                "scm.safe_mode_threshold ({}) must be between 0 and 1",
                scm.safe_mode_threshold
            )
        });
        for (key, v) in [
            (
                "scm.max_pipelines_per_datanode",
                scm.max_pipelines_per_datanode,
            ),
            (
                "scm.open_containers_per_pipeline",
                scm.open_containers_per_pipeline,
            ),
        ] {
            problems.check(v > 0, || format!("{key} must be at least 1"));
        }
        for (key, v) in [
            ("scm.replication_interval", scm.replication_interval),
            (
                "scm.replication_inflight_timeout",
                scm.replication_inflight_timeout,
            ),
            ("scm.block_deletion_interval", scm.block_deletion_interval),
        ] {
            problems.check(!v.is_zero(), || format!("{key} must be above 0"));
        }
        problems.check(scm.block_size.as_u64() > 0, || {
            "scm.block_size must be above 0".into()
        });
        problems.check(scm.block_size <= scm.container_size, || {
            format!(
                "scm.block_size ({}) must not exceed scm.container_size ({})",
                scm.block_size, scm.container_size
            )
        });
        problems.into_result()
    }

    fn log_format(&self) -> LogFormat {
        self.log.format
    }
}

impl Config {
    /// This process's TLS material (or plaintext when `security.insecure`), checked: the
    /// files, and that the certificate names this scm's node id.
    pub fn security(&self) -> anyhow::Result<rozone_rpc::Security> {
        let s = &self.security;
        let sec = rozone_rpc::Security::from_settings(s.insecure, &s.ca_cert, &s.cert, &s.key)?
            .with_limits(rozone_rpc::ServerLimits::from(&self.rpc));
        sec.check_identity(rozone_rpc::Role::Scm, self.node.id)?;
        Ok(sec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datanode_intervals_and_safe_mode_share_are_checked() {
        let mut c = Config::default();
        c.scm.datanode_stale_after = Duration::from_secs(10);
        c.scm.datanode_dead_after = Duration::from_secs(10);
        c.scm.safe_mode_threshold = 1.5;
        c.scm.max_pipelines_per_datanode = 0;
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains(
                "scm.datanode_stale_after (10s) must be less than scm.datanode_dead_after (10s)"
            ),
            "{e}"
        );
        assert!(
            e.contains("scm.safe_mode_threshold (1.5) must be between 0 and 1"),
            "{e}"
        );
        assert!(
            e.contains("scm.max_pipelines_per_datanode must be at least 1"),
            "{e}"
        );
    }

    #[test]
    fn declaration_is_documented_and_sample_round_trips() {
        rozone_config::testing::assert_config_declaration_sound::<Config>();
    }

    #[test]
    fn defaults_are_ozones_ports() {
        let c = Config::default();
        let ports = [
            c.scm.client_addr.port(),
            c.scm.peer_addr.port(),
            c.scm.checkpoint_addr.port(),
            c.http.addr.port(),
        ];
        assert_eq!(ports, [9860, 9894, 9895, 9876]);
    }

    #[test]
    fn block_size_must_fit_a_container() {
        let mut c = Config::default();
        c.scm.block_size = ByteSize::gib(6);
        c.scm.peer_addr = c.scm.client_addr;
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "scm.peer_addr (0.0.0.0:9860) uses the same port as scm.client_addr (0.0.0.0:9860); \
             scm.block_size (6GiB) must not exceed scm.container_size (5GiB)"
        );
    }
}
