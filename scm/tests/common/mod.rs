//! Shared by the SCM service tests: an in-process SCM with short intervals, gRPC clients on
//! 127.0.0.1, and a fake datanode that registers, heartbeats and keeps the commands it got.
#![allow(dead_code)]

use std::time::Duration;

use rozone_proto::scm as pb;
use rozone_proto::scm::scm_admin_client::ScmAdminClient;
use rozone_proto::scm::scm_block_client::ScmBlockClient;
use rozone_proto::scm::scm_command::Command;
use rozone_proto::scm::scm_datanode_client::ScmDatanodeClient;
use rozone_scm::config::Config;
use rozone_scm::server::ScmServer;
use tonic::transport::Channel;

pub const WAIT: Duration = Duration::from_secs(30);

/// A one-member SCM ring (`--init`) on free loopback ports; `tweak` adjusts the config.
pub async fn start_scm(dir: &std::path::Path, tweak: impl FnOnce(&mut Config)) -> ScmServer {
    // Plaintext: not a security test (mutual TLS is tested in client/tests/security*.rs).
    let mut c = Config {
        security: rozone_config::SecuritySection::insecure(),
        ..Config::default()
    };
    c.node.id = 1;
    c.node.data_dir = dir.join("scm1");
    c.scm.client_addr = "127.0.0.1:0".parse().unwrap();
    c.scm.peer_addr = "127.0.0.1:0".parse().unwrap();
    c.scm.checkpoint_addr = "127.0.0.1:0".parse().unwrap();
    c.raft.election_timeout_min = Duration::from_millis(300);
    c.raft.election_timeout_max = Duration::from_millis(600);
    c.raft.heartbeat_interval = Duration::from_millis(100);
    c.raft.fsync = false;
    c.scm.datanode_stale_after = Duration::from_secs(30);
    c.scm.datanode_dead_after = Duration::from_secs(60);
    c.scm.replication_interval = Duration::from_millis(200);
    c.scm.block_deletion_interval = Duration::from_millis(100);
    c.scm.container_size = rozone_config::ByteSize::mib(64);
    c.scm.block_size = rozone_config::ByteSize::mib(4);
    c.startup.init = true;
    tweak(&mut c);
    ScmServer::start(&c).await.expect("start SCM")
}

pub async fn channel(addr: std::net::SocketAddr) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connect to SCM")
}

pub struct Clients {
    pub dn: ScmDatanodeClient<Channel>,
    pub block: ScmBlockClient<Channel>,
    pub admin: ScmAdminClient<Channel>,
}

pub async fn clients(ring: &ScmServer) -> Clients {
    let ch = channel(ring.client_addr).await;
    Clients {
        dn: ScmDatanodeClient::new(ch.clone()),
        block: ScmBlockClient::new(ch.clone()),
        admin: ScmAdminClient::new(ch),
    }
}

/// Evaluates `$body` (an `Option`) every 25 ms until it is `Some`, or panics after
/// [`WAIT`] naming `$what`. A macro so the body may borrow the test's state mutably.
#[macro_export]
macro_rules! eventually {
    ($what:expr, $body:block) => {{
        let deadline = tokio::time::Instant::now() + common::WAIT;
        loop {
            if let Some(v) = $body {
                break v;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {}",
                $what
            );
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
    }};
}

/// Waits until the SCM has left safe mode and returns its status then. The leader queues
/// CreatePipeline before the same tick records leaving safe mode, so a member can hold that
/// command while allocation is still refused.
pub async fn out_of_safe_mode(c: &Clients) -> pb::SafeModeStatusReply {
    use crate::common;
    let mut admin = c.admin.clone();
    eventually!("the SCM left safe mode", {
        let sm = admin
            .safe_mode_status(pb::SafeModeStatusRequest {})
            .await
            .unwrap()
            .into_inner();
        (!sm.in_safe_mode).then_some(sm)
    })
}

pub fn details(id: u64) -> pb::DatanodeDetails {
    pb::DatanodeDetails {
        id,
        hostname: format!("dn{id}"),
        container_addr: format!("127.0.0.1:{}", 19000 + id),
        raft_addr: format!("127.0.0.1:{}", 19100 + id),
        replication_addr: format!("127.0.0.1:{}", 19200 + id),
    }
}

pub fn replica(
    container: u64,
    state: pb::ReplicaState,
    bcsid: u64,
    blocks: u64,
) -> pb::ContainerReplica {
    pb::ContainerReplica {
        container_id: container,
        state: state as i32,
        bcsid,
        block_count: blocks,
        used_bytes: blocks * 1024,
        origin_pipeline_id: 0,
        checksum: String::new(),
        // The digest of `blocks` identical blocks, as every replica of them would report.
        content_digest: blocks.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        digest_version: 1,
    }
}

/// A datanode as the SCM sees it over the wire; remembers every command it was sent.
pub struct FakeDn {
    pub id: u64,
    pub client: ScmDatanodeClient<Channel>,
    pub commands: Vec<pb::ScmCommand>,
}

impl FakeDn {
    pub fn new(id: u64, c: &Clients) -> Self {
        Self {
            id,
            client: c.dn.clone(),
            commands: Vec::new(),
        }
    }

    pub async fn register(&mut self, replicas: Vec<pb::ContainerReplica>) -> pb::RegisterReply {
        self.register_with(vec![volume(false, (1 << 40) - (1 << 30))], replicas)
            .await
    }

    /// Registers with these volumes.
    pub async fn register_with(
        &mut self,
        storage: Vec<pb::StorageReport>,
        replicas: Vec<pb::ContainerReplica>,
    ) -> pb::RegisterReply {
        self.client
            .register(pb::RegisterRequest {
                datanode: Some(details(self.id)),
                node_report: Some(pb::NodeReport { storage }),
                container_report: Some(pb::ContainerReport { replicas }),
                pipeline_reports: vec![],
            })
            .await
            .expect("register")
            .into_inner()
    }

    /// Heartbeats with an incremental report and command statuses; keeps the commands.
    pub async fn beat_with(
        &mut self,
        incremental: Vec<pb::ContainerReplica>,
        status: Vec<pb::CommandStatus>,
    ) -> pb::HeartbeatReply {
        let r = self
            .client
            .heartbeat(pb::HeartbeatRequest {
                datanode_id: self.id,
                node_report: None,
                full_container_report: None,
                incremental_container_report: incremental,
                pipeline_reports: vec![],
                pipeline_actions: vec![],
                command_status: status,
            })
            .await
            .expect("heartbeat")
            .into_inner();
        self.commands.extend(r.commands.iter().cloned());
        r
    }

    /// Heartbeats with a node report of these volumes and an incremental report.
    pub async fn beat_storage(
        &mut self,
        storage: Vec<pb::StorageReport>,
        incremental: Vec<pb::ContainerReplica>,
    ) -> pb::HeartbeatReply {
        let r = self
            .client
            .heartbeat(pb::HeartbeatRequest {
                datanode_id: self.id,
                node_report: Some(pb::NodeReport { storage }),
                incremental_container_report: incremental,
                ..Default::default()
            })
            .await
            .expect("heartbeat")
            .into_inner();
        self.commands.extend(r.commands.iter().cloned());
        r
    }

    pub async fn beat(&mut self) -> pb::HeartbeatReply {
        self.beat_with(vec![], vec![]).await
    }

    /// Commands received so far that match `f`.
    pub fn got(&self, f: impl Fn(&Command) -> bool) -> Vec<pb::ScmCommand> {
        self.commands
            .iter()
            .filter(|c| c.command.as_ref().is_some_and(&f))
            .cloned()
            .collect()
    }
}

/// One volume of 1 TiB in a node report: `failed`, with `remaining` bytes (0: full).
pub fn volume(failed: bool, remaining: u64) -> pb::StorageReport {
    pb::StorageReport {
        path: "/data".into(),
        capacity: 1 << 40,
        used: (1u64 << 40).saturating_sub(remaining),
        remaining,
        failed,
    }
}

pub fn executed(id: u64) -> pb::CommandStatus {
    pb::CommandStatus {
        command_id: id,
        status: pb::command_status::Status::Executed as i32,
        message: String::new(),
    }
}
