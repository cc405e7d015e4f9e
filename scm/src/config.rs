//! The `rozone-scm` config: `[node]`, `[scm]`, `[raft]`, `[http]`, `[log]`
//! and the ring's `[[peers]]`.

use std::net::SocketAddr;
use std::time::Duration;

use rozone_config::{
    check_listen_addrs, check_peers, config_struct, listen_on, ByteSize, ConfigError, DaemonConfig,
    HttpSection, LogFormat, LogSection, NodeSection, Peer, Problems, RaftSection,
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
        self.raft.check(&mut problems);
        check_peers(&self.peers, self.node.id, &mut problems);
        let scm = &self.scm;
        check_listen_addrs(
            &[
                ("scm.client_addr", scm.client_addr),
                ("scm.peer_addr", scm.peer_addr),
                ("scm.checkpoint_addr", scm.checkpoint_addr),
                ("http.addr", self.http.addr),
            ],
            &mut problems,
        );
        problems.check(scm.bootstrap_attempts > 0, || {
            "scm.bootstrap_attempts must be at least 1".into()
        });
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
