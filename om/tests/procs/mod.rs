//! A ring of real `rozone-om` processes for fault tests: each member's peer port sits behind
//! a [`Proxy`] that the test can cut, and each process can be paused (SIGSTOP), resumed,
//! killed and restarted. Everything a test waits for is polled with a deadline.
#![allow(dead_code)]

use rozone_telemetry::testkit::free_port;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use rozone_proto::om as pb;
use rozone_proto::om::om_service_client::OmServiceClient;
use rozone_proto::ring as rpb;
use rozone_proto::ring::ring_client::RingClient;
use rozone_telemetry::proxy::Proxy;
use rozone_telemetry::testkit::{self, Daemon};
use tonic::transport::Channel;
use tonic::Status;

const BIN: &str = env!("CARGO_BIN_EXE_rozone-om");
/// A bound on anything a test waits for ("hung", not "slow").
pub const WAIT: Duration = Duration::from_secs(60);
/// A bound on one RPC: a paused process never answers.
const CALL: Duration = Duration::from_secs(3);

/// One member: its config file, its process (if running) and the proxy of its peer port.
pub struct Member {
    pub id: u64,
    pub client_addr: String,
    pub config: PathBuf,
    pub proxy: Proxy,
    pub daemon: Option<Daemon>,
}

pub struct ProcRing {
    pub root: tempfile::TempDir,
    pub members: BTreeMap<u64, Member>,
}

impl ProcRing {
    /// Starts `n` members: 1 with `--init`, the others with `--bootstrap`; waits until
    /// every one is a voter.
    pub async fn start(n: u64) -> Self {
        let mut ring = Self::configure(n);
        for id in 1..=n {
            ring.spawn(
                id,
                if id == 1 {
                    &["--init"]
                } else {
                    &["--bootstrap"]
                },
            );
            ring.wait_serving(id);
        }
        ring.wait_voters(n).await;
        ring
    }

    /// Writes the configs of `n` members (each lists all `n`) and starts none.
    pub fn configure(n: u64) -> Self {
        let root = tempfile::tempdir().expect("temp dir");
        let scm = format!("127.0.0.1:{}", free_port());
        let mut members = BTreeMap::new();
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
        for (id, (peer, client, proxy)) in listen {
            let dir = root.path().join(format!("om{id}"));
            let toml = format!(
                "[node]\nid = {id}\ndata_dir = \"{}\"\n\n[om]\nclient_addr = \"{client}\"\n\
                 peer_addr = \"{peer}\"\nscm_addrs = [\"{scm}\"]\n\n[http]\naddr = \"127.0.0.1:0\"\n\n\
                 [raft]\nfsync = false\nelection_timeout_min = \"500ms\"\n\
                 election_timeout_max = \"1s\"\nheartbeat_interval = \"100ms\"\n\n{peers}",
                dir.display()
            );
            let config = root.path().join(format!("om{id}.toml"));
            std::fs::write(&config, toml).expect("write config");
            members.insert(
                id,
                Member {
                    id,
                    client_addr: client,
                    config,
                    proxy,
                    daemon: None,
                },
            );
        }
        Self { root, members }
    }

    /// Starts member `id` with these startup flags (does not wait for anything).
    pub fn spawn(&mut self, id: u64, flags: &[&str]) {
        let m = self.members.get_mut(&id).expect("member");
        // Plaintext: these tests are about reads under faults, not security.
        let mut cmd = testkit::insecure_command(BIN);
        cmd.arg("--config").arg(&m.config).args(flags);
        m.daemon = Some(Daemon::spawn(cmd).expect("spawn rozone-om"));
    }

    /// Waits for the process's "OM serving" line.
    pub fn wait_serving(&self, id: u64) {
        self.daemon(id)
            .wait_for_stderr("OM serving", WAIT)
            .unwrap_or_else(|e| panic!("OM {id} did not start: {e}"));
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

    /// Waits until member `id` exits by itself; returns its stderr.
    pub fn wait_exit(&mut self, id: u64) -> String {
        let m = self.members.get_mut(&id).expect("member");
        let mut d = m.daemon.take().expect("running");
        d.wait_exit(WAIT)
            .unwrap_or_else(|e| panic!("OM {id} was expected to exit: {e}"));
        d.stderr()
    }

    /// Whether member `id`'s process is still running (it was started and has not exited).
    pub fn running(&mut self, id: u64) -> bool {
        let m = self.members.get_mut(&id).expect("member");
        m.daemon
            .as_mut()
            .is_some_and(|d| d.wait_exit(Duration::ZERO).is_err())
    }

    /// Member `id`'s data directory.
    pub fn data_dir(&self, id: u64) -> PathBuf {
        self.root.path().join(format!("om{id}"))
    }

    /// Waits until member `asked` reports a membership for which `pred` holds.
    pub async fn wait_members(
        &self,
        asked: u64,
        what: &str,
        pred: impl Fn(&[rpb::RingMember]) -> bool,
    ) -> rpb::RingInfoReply {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Ok(r) = self.ring_info(asked).await {
                if pred(&r.members) {
                    return r;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "OM {asked} never reported {what}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Starts a stopped member again from its data directory (no startup flags).
    pub fn restart(&mut self, id: u64) {
        self.spawn(id, &[]);
        self.wait_serving(id);
    }

    pub fn client_addr(&self, id: u64) -> &str {
        &self.members[&id].client_addr
    }

    /// The OM client of member `id`.
    pub async fn om(&self, id: u64) -> Result<OmServiceClient<Channel>, String> {
        Ok(OmServiceClient::new(self.channel(id).await?))
    }

    /// A channel to member `id`'s client port, every call bounded by [`CALL`].
    pub async fn channel(&self, id: u64) -> Result<Channel, String> {
        Channel::from_shared(format!("http://{}", self.client_addr(id)))
            .map_err(|e| e.to_string())?
            .connect_timeout(CALL)
            .timeout(CALL)
            .connect()
            .await
            .map_err(|e| e.to_string())
    }

    /// Member `id`'s view of the ring, or why it did not answer.
    pub async fn ring_info(&self, id: u64) -> Result<rpb::RingInfoReply, String> {
        RingClient::new(self.channel(id).await?)
            .ring_info(rpb::RingInfoRequest {})
            .await
            .map(|r| r.into_inner())
            .map_err(|e| e.to_string())
    }

    /// Waits until one of `among` says it is a ready leader, and returns it.
    pub async fn wait_leader(&self, among: &[u64]) -> u64 {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            for id in among {
                if let Ok(r) = self.ring_info(*id).await {
                    if r.leader_ready && r.leader_id == Some(*id) {
                        return *id;
                    }
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no ready leader among {among:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn wait_voters(&self, n: u64) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let l = self.wait_leader(&self.ids()).await;
            if let Ok(r) = self.ring_info(l).await {
                if r.members.iter().filter(|m| m.voter).count() as u64 == n {
                    return;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "ring did not reach {n} voters"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn ids(&self) -> Vec<u64> {
        self.members.keys().copied().collect()
    }

    /// Creates a volume through `id`, retrying refusals a client retries.
    pub async fn create_volume(&self, id: u64, name: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let r = match self.om(id).await {
                Ok(mut c) => c
                    .create_volume(pb::CreateVolumeRequest {
                        name: name.into(),
                        ..Default::default()
                    })
                    .await
                    .map(|_| ()),
                Err(e) => Err(Status::unavailable(e)),
            };
            match r {
                Ok(()) => return,
                Err(s) if s.code() == tonic::Code::AlreadyExists => return,
                Err(s) => assert!(
                    tokio::time::Instant::now() < deadline,
                    "create volume {name} on OM {id}: {s:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A DEFAULT read of a volume's info on member `id`.
    pub async fn volume_info(&self, id: u64, name: &str) -> Result<pb::VolumeInfoReply, Status> {
        let mut c = self.om(id).await.map_err(Status::unavailable)?;
        c.volume_info(pb::VolumeInfoRequest {
            name: name.into(),
            read: Some(pb::ReadOptions {
                consistency: pb::ReadConsistency::Default as i32,
                ..Default::default()
            }),
        })
        .await
        .map(|r| r.into_inner())
    }
}

impl Drop for ProcRing {
    fn drop(&mut self) {
        // A paused process ignores SIGKILL's neighbours but not SIGKILL; resume anyway so
        // nothing lingers stopped.
        for m in self.members.values() {
            if let Some(d) = &m.daemon {
                let _ = d.signal("CONT");
            }
        }
    }
}
