//! The `rozone-datanode` config: `[node]`, `[datanode]`, `[raft]` (for
//! pipeline rings), `[http]` and `[log]`.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use rozone_config::{
    check_host_ports, check_listen_addrs, config_struct, listen_on, ByteSize, ConfigError,
    DaemonConfig, HttpSection, LogFormat, LogSection, NodeSection, Problems, RaftSection,
    RpcSection, SecuritySection,
};

config_struct! {
    /// The datanode's listeners, disks and SCM.
    pub struct DatanodeSection {
        /// Container gRPC listener: chunk reads and writes from clients.
        pub container_addr: SocketAddr = listen_on(9859),
        /// Raft listener for the pipelines this datanode is a member of.
        pub raft_addr: SocketAddr = listen_on(9858),
        /// Serves container copies to other datanodes re-replicating them.
        pub replication_addr: SocketAddr = listen_on(9886),
        /// Volumes: one directory per disk for container data. Empty: a
        /// single volume in <node.data_dir>/hdds.
        pub data_dirs: Vec<PathBuf> = Vec::new(),
        /// Client addresses (host:port) of the SCM ring's members, for
        /// registration, heartbeats and container reports.
        pub scm_addrs: Vec<String> = vec!["127.0.0.1:9860".into()],
        /// Host name (or IP) other datanodes and clients reach this datanode
        /// at; empty: the listeners' addresses (a wildcard becomes 127.0.0.1).
        pub advertise_host: String = String::new(),
        /// How often to heartbeat the SCM leader (node, pipeline and changed
        /// container reports; commands come back in the reply).
        #[serde(with = "rozone_config::duration")]
        pub heartbeat_interval: Duration = Duration::from_secs(10),
        /// How often to heartbeat while this datanode is in no healthy pipeline (a
        /// new or restarted node, or one whose pipelines failed): the SCM hands out
        /// pipelines in heartbeat replies, so one opens within this long of being
        /// made. Also the pause after a failed heartbeat or registration, times
        /// the failures in a row (up to heartbeat_interval). Capped by
        /// heartbeat_interval.
        #[serde(with = "rozone_config::duration")]
        pub heartbeat_interval_without_pipeline: Duration = Duration::from_millis(250),
        /// How often a heartbeat carries the full container report (one is
        /// also sent at registration).
        #[serde(with = "rozone_config::duration")]
        pub container_report_interval: Duration = Duration::from_secs(60),
        /// Capacity accounted per data directory; 0 = the size of the
        /// filesystem holding it. Free space is always capped by the
        /// filesystem's.
        pub volume_capacity: ByteSize = ByteSize(0),
        /// fsync chunk files and container metadata before acknowledging a
        /// write. Turn off only in throwaway test clusters.
        pub sync_writes: bool = true,
        /// How long a volume's filesystem may take to answer the periodic
        /// space check (statvfs, every heartbeat_interval). A volume that does
        /// not answer in time (a hung disk or mount) is marked failed until
        /// the datanode restarts, and reported failed to the SCM.
        #[serde(with = "rozone_config::duration")]
        pub volume_check_timeout: Duration = Duration::from_secs(30),
    }
}

config_struct! {
    /// Configuration of one `rozone-datanode` process.
    pub struct Config {
        /// This node's identity and metadata directory.
        pub node: NodeSection = NodeSection::in_dir("/var/lib/rozone/datanode"),
        /// Datanode listeners, volumes and SCM addresses.
        pub datanode: DatanodeSection = DatanodeSection::default(),
        /// Raft timing and log compaction of the pipeline rings.
        pub raft: RaftSection = RaftSection::default(),
        /// The /metrics, /health and /ready endpoint.
        pub http: HttpSection = HttpSection::on(9882),
        /// Log layout.
        pub log: LogSection = LogSection::default(),
        /// Mutual TLS on every gRPC port, or (explicitly) plaintext.
        pub security: SecuritySection = SecuritySection::default(),
        /// Limits of every gRPC server of this process.
        pub rpc: RpcSection = RpcSection::default(),
    }
}

impl Config {
    /// The volume directories in use: `datanode.data_dirs`, or
    /// `<node.data_dir>/hdds` when that is empty.
    pub fn volumes(&self) -> Vec<PathBuf> {
        if self.datanode.data_dirs.is_empty() {
            vec![self.node.data_dir.join("hdds")]
        } else {
            self.datanode.data_dirs.clone()
        }
    }
}

impl DaemonConfig for Config {
    fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Problems::default();
        self.node.check(&mut problems);
        self.security.check(&mut problems);
        self.rpc.check(&mut problems);
        self.raft.check(&mut problems);
        let dn = &self.datanode;
        check_host_ports("datanode.scm_addrs", &dn.scm_addrs, &mut problems);
        problems.check(!dn.scm_addrs.is_empty(), || {
            "datanode.scm_addrs must name at least one SCM".into()
        });
        problems.check(!dn.heartbeat_interval.is_zero(), || {
            "datanode.heartbeat_interval must be above 0".into()
        });
        problems.check(!dn.heartbeat_interval_without_pipeline.is_zero(), || {
            "datanode.heartbeat_interval_without_pipeline must be above 0".into()
        });
        problems.check(!dn.volume_check_timeout.is_zero(), || {
            "datanode.volume_check_timeout must be above 0".into()
        });
        problems.check(
            dn.container_report_interval >= dn.heartbeat_interval,
            || {
                "datanode.container_report_interval must be at least datanode.heartbeat_interval"
                    .into()
            },
        );
        let mut seen = BTreeSet::new();
        for (i, dir) in dn.data_dirs.iter().enumerate() {
            problems.check(!dir.as_os_str().is_empty(), || {
                format!("datanode.data_dirs[{i}] must not be empty")
            });
            problems.check(seen.insert(dir), || {
                format!(
                    "datanode.data_dirs[{i}] ({}) is listed twice",
                    dir.display()
                )
            });
        }
        check_listen_addrs(
            &[
                ("datanode.container_addr", dn.container_addr),
                ("datanode.raft_addr", dn.raft_addr),
                ("datanode.replication_addr", dn.replication_addr),
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
    /// files, and that the certificate names this datanode's node id.
    pub fn security(&self) -> anyhow::Result<rozone_rpc::Security> {
        let s = &self.security;
        let sec = rozone_rpc::Security::from_settings(s.insecure, &s.ca_cert, &s.cert, &s.key)?
            .with_limits(rozone_rpc::ServerLimits::from(&self.rpc));
        sec.check_identity(rozone_rpc::Role::Datanode, self.node.id)?;
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
        let dn = &c.datanode;
        let ports = [
            dn.container_addr.port(),
            dn.raft_addr.port(),
            dn.replication_addr.port(),
            c.http.addr.port(),
        ];
        assert_eq!(ports, [9859, 9858, 9886, 9882]);
    }

    #[test]
    fn volume_check_timeout_must_be_above_zero() {
        let mut c = Config::default();
        assert_eq!(c.datanode.volume_check_timeout, Duration::from_secs(30));
        c.datanode.volume_check_timeout = Duration::ZERO;
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "datanode.volume_check_timeout must be above 0"
        );
    }

    #[test]
    fn volumes_default_under_the_data_dir_and_must_be_distinct() {
        let mut c = Config::default();
        assert_eq!(
            c.volumes(),
            [PathBuf::from("/var/lib/rozone/datanode/hdds")]
        );
        c.datanode.data_dirs = vec!["/disk1".into(), "/disk1".into()];
        assert_eq!(c.volumes().len(), 2);
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "datanode.data_dirs[1] (/disk1) is listed twice"
        );
    }
}
