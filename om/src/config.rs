//! The `rozone-om` config: `[node]`, `[om]`, `[raft]`, `[http]`, `[log]`
//! and the ring's `[[peers]]`.

use std::net::SocketAddr;

use rozone_config::{
    check_host_ports, check_listen_addrs, check_peers, config_struct, listen_on, ConfigError,
    DaemonConfig, HttpSection, LogFormat, LogSection, NodeSection, Peer, Problems, RaftSection,
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
        self.raft.check(&mut problems);
        check_peers(&self.peers, self.node.id, &mut problems);
        check_host_ports("om.scm_addrs", &self.om.scm_addrs, &mut problems);
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
    fn scm_addresses_are_required() {
        let mut c = Config::default();
        c.om.scm_addrs.clear();
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "om.scm_addrs must list at least one host:port"
        );
    }
}
