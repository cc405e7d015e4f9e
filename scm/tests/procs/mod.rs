//! A ring of real `rozone-scm` processes for fault tests: each member's peer port sits behind
//! a [`Proxy`] the test can cut, and each process can be paused (SIGSTOP), resumed and
//! killed. Datanodes are played over the real datanode protocol (register with addresses,
//! no heartbeats needed while `datanode_stale_after` is long). Everything a test waits for
//! is polled with a deadline.
#![allow(dead_code)]

use rozone_telemetry::testkit::free_port;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rozone_proto::ring::ring_client::RingClient;
use rozone_proto::scm as pb;
use rozone_proto::scm::scm_admin_client::ScmAdminClient;
use rozone_proto::scm::scm_block_client::ScmBlockClient;
use rozone_proto::scm::scm_datanode_client::ScmDatanodeClient;
use rozone_telemetry::proxy::Proxy;
use rozone_telemetry::testkit::{self, Daemon};
use tonic::transport::Channel;
use tonic::Status;

const BIN: &str = env!("CARGO_BIN_EXE_rozone-scm");
/// A bound on anything a test waits for ("hung", not "slow").
pub const WAIT: Duration = Duration::from_secs(60);
/// A bound on one RPC: a paused process never answers.
const CALL: Duration = Duration::from_secs(3);
/// The ring's Raft timing (also the unit of the tests' bounds).
pub const ELECTION_TIMEOUT_MAX: Duration = Duration::from_secs(1);
const RAFT: &str = "[raft]\nfsync = false\nelection_timeout_min = \"500ms\"\n\
                    election_timeout_max = \"1s\"\nheartbeat_interval = \"100ms\"\n";

/// One member: its config file, its process (if running) and the proxy of its peer port.
pub struct Member {
    pub id: u64,
    pub client_addr: String,
    pub config: PathBuf,
    pub proxy: Proxy,
    pub daemon: Option<Daemon>,
}

pub struct ScmProcs {
    pub root: tempfile::TempDir,
    pub members: BTreeMap<u64, Member>,
}

impl ScmProcs {
    /// Starts `n` members: 1 with `--init`, the others with `--bootstrap`, one at a time;
    /// waits until every one is a voter.
    pub async fn start(n: u64) -> Self {
        let root = tempfile::tempdir().expect("temp dir");
        let mut peers = String::new();
        let mut listen = BTreeMap::new();
        for id in 1..=n {
            let peer: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            let client = format!("127.0.0.1:{}", free_port());
            let proxy = Proxy::start(peer).expect("proxy");
            peers.push_str(&format!(
                "[[peers]]\nid = {id}\npeer_addr = \"{}\"\nclient_addr = \"{client}\"\n\n",
                proxy.addr()
            ));
            listen.insert(id, (peer, client, proxy));
        }
        let mut members = BTreeMap::new();
        // The checkpoint port is bound as port 0 and advertised as bound (no port race).
        for (id, (peer, client, proxy)) in listen {
            let toml = format!(
                "[node]\nid = {id}\ndata_dir = {:?}\n\n[scm]\nclient_addr = \"{client}\"\n\
                 peer_addr = \"{peer}\"\ncheckpoint_addr = \"127.0.0.1:0\"\n\
                 bootstrap_retry_pause = \"200ms\"\ndatanode_stale_after = \"5m\"\n\
                 datanode_dead_after = \"10m\"\n\n[http]\naddr = \"127.0.0.1:0\"\n\n{RAFT}\n{peers}",
                root.path().join(format!("scm{id}")),
            );
            let config = root.path().join(format!("scm{id}.toml"));
            std::fs::write(&config, toml).expect("write config");
            let member = Member {
                id,
                client_addr: client,
                config,
                proxy,
                daemon: None,
            };
            members.insert(id, member);
        }
        let mut ring = Self { root, members };
        for id in 1..=n {
            let (flag, line) = if id == 1 {
                ("--init", "cluster created")
            } else {
                ("--bootstrap", "joined the SCM ring")
            };
            ring.spawn(id, &[flag]);
            ring.daemon(id)
                .wait_for_stderr(line, WAIT)
                .unwrap_or_else(|e| panic!("SCM {id} did not start: {e}"));
        }
        ring.wait_voters(n).await;
        ring
    }

    fn spawn(&mut self, id: u64, flags: &[&str]) {
        let m = self.members.get_mut(&id).expect("member");
        // Not a security test: plaintext, asked for explicitly.
        let mut cmd = testkit::insecure_command(BIN);
        cmd.arg("--config").arg(&m.config).args(flags);
        m.daemon = Some(Daemon::spawn(cmd).expect("spawn rozone-scm"));
    }

    pub fn daemon(&self, id: u64) -> &Daemon {
        self.members[&id].daemon.as_ref().expect("running")
    }

    /// Sends a signal by name ("STOP", "CONT", "KILL").
    pub fn signal(&self, id: u64, sig: &str) {
        self.daemon(id).signal(sig).expect("signal");
    }

    /// SIGKILL, and wait until the process is gone.
    pub fn kill(&mut self, id: u64) {
        self.signal(id, "KILL");
        let m = self.members.get_mut(&id).expect("member");
        let mut d = m.daemon.take().expect("running");
        d.wait_exit(WAIT).expect("exit after SIGKILL");
    }

    pub fn ids(&self) -> Vec<u64> {
        self.members.keys().copied().collect()
    }

    pub fn others(&self, id: u64) -> Vec<u64> {
        self.ids().into_iter().filter(|x| *x != id).collect()
    }

    /// A channel to member `id`'s client port, every call bounded by [`CALL`].
    pub async fn channel(&self, id: u64) -> Result<Channel, Status> {
        Channel::from_shared(format!("http://{}", self.members[&id].client_addr))
            .map_err(|e| Status::internal(e.to_string()))?
            .connect_timeout(CALL)
            .timeout(CALL)
            .connect()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))
    }

    pub async fn block(&self, id: u64) -> Result<ScmBlockClient<Channel>, Status> {
        Ok(ScmBlockClient::new(self.channel(id).await?))
    }

    pub async fn admin(&self, id: u64) -> Result<ScmAdminClient<Channel>, Status> {
        Ok(ScmAdminClient::new(self.channel(id).await?))
    }

    /// Member `id`'s view of the ring, or why it did not answer.
    pub async fn ring_info(&self, id: u64) -> Result<rozone_proto::ring::RingInfoReply, Status> {
        RingClient::new(self.channel(id).await?)
            .ring_info(rozone_proto::ring::RingInfoRequest {})
            .await
            .map(|r| r.into_inner())
    }

    /// Waits until one of `among` says it is a ready leader, and returns it.
    pub async fn wait_leader(&self, among: &[u64]) -> u64 {
        let deadline = Instant::now() + WAIT;
        loop {
            for id in among {
                if let Ok(r) = self.ring_info(*id).await {
                    if r.leader_ready && r.leader_id == Some(*id) {
                        return *id;
                    }
                }
            }
            assert!(Instant::now() < deadline, "no ready leader among {among:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_voters(&self, n: u64) {
        let deadline = Instant::now() + WAIT;
        loop {
            let l = self.wait_leader(&self.ids()).await;
            if let Ok(r) = self.ring_info(l).await {
                if r.members.iter().filter(|m| m.voter).count() as u64 == n {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "ring did not reach {n} voters");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Registers datanodes `ids` with the leader `l` (addresses only; no heartbeats).
    pub async fn register_datanodes(&self, l: u64, ids: &[u64]) {
        let mut c = ScmDatanodeClient::new(self.channel(l).await.expect("channel"));
        for id in ids {
            c.register(pb::RegisterRequest {
                datanode: Some(pb::DatanodeDetails {
                    id: *id,
                    hostname: format!("dn{id}"),
                    container_addr: format!("127.0.0.1:{}", 19000 + id),
                    raft_addr: format!("127.0.0.1:{}", 19100 + id),
                    replication_addr: format!("127.0.0.1:{}", 19200 + id),
                }),
                node_report: None,
                container_report: Some(pb::ContainerReport { replicas: vec![] }),
                pipeline_reports: vec![],
            })
            .await
            .unwrap_or_else(|s| panic!("register datanode {id}: {s:?}"));
        }
    }

    /// One AllocateBlock of one block for owner "om" on member `id`.
    pub async fn allocate(&self, id: u64) -> Result<pb::AllocateBlockReply, Status> {
        self.block(id)
            .await?
            .allocate_block(pb::AllocateBlockRequest {
                count: 1,
                size: 0,
                owner: "om".into(),
                ..Default::default()
            })
            .await
            .map(|r| r.into_inner())
    }

    /// Allocates one block as a client would: tries `among` in turn, moving on after a
    /// refusal or an unreachable member, until one allocates or `deadline` passes. Returns
    /// the reply (or the last error) and every error on the way.
    pub async fn allocate_with_retries(
        &self,
        among: &[u64],
        deadline: Duration,
    ) -> (Result<pb::AllocateBlockReply, Status>, Vec<Status>) {
        let until = Instant::now() + deadline;
        let mut errors = Vec::new();
        loop {
            for id in among {
                match self.allocate(*id).await {
                    Ok(r) => return (Ok(r), errors),
                    Err(s) => errors.push(s),
                }
            }
            if Instant::now() >= until {
                let last = errors.last().cloned().expect("an error");
                return (Err(last), errors);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for ScmProcs {
    fn drop(&mut self) {
        // Nothing may linger stopped.
        for m in self.members.values() {
            if let Some(d) = &m.daemon {
                let _ = d.signal("CONT");
            }
        }
    }
}
