//! rozone-tests: the in-process cluster harness used by the Raft-layer tests and benchmark.
//!
//! A [`Cluster`] runs N members of one Raft group in this process, each with its own data
//! directory, its own peer gRPC server on 127.0.0.1 and its own channel cache, so traffic
//! between members is real gRPC over loopback. The state machine is any
//! `StateMachineLogic` (the SCM's tests use theirs); by default [`KvLogic`], a small
//! key-value store over two column families. Plaintext (insecure): these tests are about
//! Raft, not security (the peer port's mutual TLS is tested on the daemons).

pub mod kv;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use rozone_raft::{
    GroupConfig, GroupRegistry, NodeId, NodeInfo, PeerChannels, RaftGroup, StateMachineLogic,
};
use tokio::sync::oneshot;

pub use kv::{KvLogic, KvRequest, KvResponse};

/// Generous bound for anything a test waits on: readiness waits, never fixed sleeps.
pub const WAIT: Duration = Duration::from_secs(30);

pub const GROUP: &str = "test-group";

/// One member: its group, its peer server, its data directory.
pub struct Member<L: StateMachineLogic = KvLogic> {
    pub id: NodeId,
    pub addr: String,
    pub dir: PathBuf,
    pub group: Arc<RaftGroup<L>>,
    stop_server: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

/// Tweaks applied to every member's group config.
pub type Tune = Arc<dyn Fn(&mut GroupConfig) + Send + Sync>;

/// An in-process Raft group over real gRPC on loopback, for any state machine.
pub struct RaftCluster<L: StateMachineLogic> {
    pub root: tempfile::TempDir,
    pub members: BTreeMap<NodeId, Member<L>>,
    /// Addresses stay fixed across restarts: they are in the membership.
    addrs: BTreeMap<NodeId, String>,
    tune: Tune,
}

pub use rozone_telemetry::testkit::free_port;

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,rozone_raft=info".into()),
        )
        .with_test_writer()
        .try_init();
}

impl<L: StateMachineLogic + Default> RaftCluster<L> {
    pub fn new(tune: Tune) -> anyhow::Result<Self> {
        Ok(Self {
            root: tempfile::tempdir()?,
            members: BTreeMap::new(),
            addrs: BTreeMap::new(),
            tune,
        })
    }

    /// Starts `n` members (ids 1..=n) and initialises the group on member 1.
    pub async fn start(n: u64, tune: Tune) -> anyhow::Result<Self> {
        let mut c = Self::new(tune)?;
        for id in 1..=n {
            c.start_member(id).await?;
        }
        let members: BTreeMap<NodeId, NodeInfo> = (1..=n).map(|id| (id, c.info(id))).collect();
        c.member(1)?.group.initialize(members).await?;
        c.wait_ready_leader().await?;
        Ok(c)
    }

    pub fn info(&self, id: NodeId) -> NodeInfo {
        let a = self.addrs.get(&id).cloned().unwrap_or_default();
        NodeInfo::new(a.clone(), a)
    }

    pub fn member(&self, id: NodeId) -> anyhow::Result<&Member<L>> {
        self.members
            .get(&id)
            .with_context(|| format!("member {id} is not running"))
    }

    /// Starts (or restarts, from its data directory and on its old address) member `id`.
    pub async fn start_member(&mut self, id: NodeId) -> anyhow::Result<()> {
        let bind = self
            .addrs
            .get(&id)
            .cloned()
            .unwrap_or_else(|| "127.0.0.1:0".to_string());
        let (listener, addr) = rozone_raft::server::bind(&bind).await?;
        let addr = addr.to_string();
        self.addrs.insert(id, addr.clone());
        let dir = self.root.path().join(format!("n{id}"));
        let mut cfg = GroupConfig::new(GROUP, id, NodeInfo::new(&addr, &addr), dir.clone());
        // Short timeouts keep tests quick; they are bounds, not sleeps.
        cfg.election_timeout_min = Duration::from_millis(300);
        cfg.election_timeout_max = Duration::from_millis(600);
        cfg.heartbeat_interval = Duration::from_millis(100);
        cfg.download.pause = Duration::from_millis(200);
        (self.tune)(&mut cfg);
        let registry = GroupRegistry::default();
        let channels = Arc::new(PeerChannels::new(rozone_rpc::ChannelFactory::insecure()));
        // A member just stopped may still hold its RocksDB lock for a moment (its last
        // background task drops the handle): retry that one error, within the wait bound.
        let deadline = tokio::time::Instant::now() + WAIT;
        let group = loop {
            match RaftGroup::start(cfg.clone(), L::default(), &registry, channels.clone()).await {
                Err(e) if is_lock_held(&e) && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                r => break r?,
            }
        };
        let (tx, rx) = oneshot::channel();
        let server = tokio::spawn(async move {
            let _ = rozone_raft::server::serve_peer(
                listener,
                registry,
                &rozone_rpc::Security::insecure(),
                rozone_rpc::Role::Scm,
                async {
                    let _ = rx.await;
                },
            )
            .await;
        });
        self.members.insert(
            id,
            Member {
                id,
                addr,
                dir,
                group,
                stop_server: Some(tx),
                server: Some(server),
            },
        );
        Ok(())
    }

    /// Prepares member `id` (not started yet) to join by taking member `from`'s newest
    /// checkpoint as its state.
    pub async fn bootstrap_member(
        &self,
        id: NodeId,
        from: NodeId,
        policy: &rozone_raft::DownloadPolicy,
    ) -> Result<(), rozone_raft::download::BootstrapError> {
        let source = self.addrs.get(&from).cloned().unwrap_or_default();
        let cfs = L::default().column_families();
        rozone_raft::download::bootstrap_from_checkpoint(
            &self.root.path().join(format!("n{id}")),
            &cfs,
            &PeerChannels::new(rozone_rpc::ChannelFactory::insecure()),
            &source,
            GROUP,
            policy,
        )
        .await
        .map(|_| ())
    }

    /// Stops member `id` as a crash would look to the others: its server goes away and its
    /// Raft stops; its data directory stays.
    pub async fn stop_member(&mut self, id: NodeId) -> anyhow::Result<()> {
        let mut m = self
            .members
            .remove(&id)
            .with_context(|| format!("member {id} is not running"))?;
        if let Some(tx) = m.stop_server.take() {
            let _ = tx.send(());
        }
        m.group.shutdown().await;
        if let Some(s) = m.server.take() {
            // Peers keep append streams open, so a graceful stop would wait for them: cut
            // the connections as a crash would.
            s.abort();
            let _ = s.await;
        }
        // Wait until every handle on the databases is gone so a restart can reopen them.
        let weak = Arc::downgrade(&m.group);
        drop(m);
        let deadline = tokio::time::Instant::now() + WAIT;
        while weak.strong_count() > 0 {
            if tokio::time::Instant::now() > deadline {
                bail!("member {id} still referenced after stop");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Waits until some running member is a ready leader and returns its id.
    pub async fn wait_ready_leader(&self) -> anyhow::Result<NodeId> {
        self.wait_ready_leader_within(WAIT).await
    }

    /// [`Self::wait_ready_leader`] with a bound of the caller's (a test that a leader comes
    /// before some timer could have fired).
    pub async fn wait_ready_leader_within(&self, within: Duration) -> anyhow::Result<NodeId> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            for (id, m) in &self.members {
                if m.group.is_ready_leader() {
                    return Ok(*id);
                }
            }
            if tokio::time::Instant::now() > deadline {
                bail!("no ready leader among {:?}", self.members.keys());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn leader(&self) -> anyhow::Result<&Arc<RaftGroup<L>>> {
        let id = self.wait_ready_leader().await?;
        Ok(&self.member(id)?.group)
    }

    /// Waits until every running member has applied at least `index`.
    pub async fn wait_applied(&self, index: u64) -> anyhow::Result<()> {
        for m in self.members.values() {
            m.group.wait_applied(index, WAIT).await?;
        }
        Ok(())
    }

    /// Waits until the leader has applied its whole log and every running member has
    /// applied as far.
    pub async fn wait_converged(&self) -> anyhow::Result<u64> {
        let idx = self.leader().await?.wait_log_applied(WAIT).await?;
        self.wait_applied(idx).await?;
        Ok(idx)
    }

    pub fn running(&self) -> BTreeSet<NodeId> {
        self.members.keys().copied().collect()
    }

    /// Stops every member.
    pub async fn stop_all(&mut self) -> anyhow::Result<()> {
        let ids: Vec<_> = self.members.keys().copied().collect();
        for id in ids {
            self.stop_member(id).await?;
        }
        Ok(())
    }
}

impl Cluster {
    /// Converges, builds a snapshot on `leader` and purges its log up to it, so a member
    /// that needs earlier entries must install the snapshot. Returns the purged index.
    pub async fn snapshot_and_purge(&self, leader: &RaftGroup<KvLogic>) -> anyhow::Result<u64> {
        self.wait_converged().await?;
        let upto = leader.snapshot_now(WAIT).await?;
        leader.purge_log(upto).await?;
        leader
            .wait_for(WAIT, "log purged", move |m| {
                m.purged.as_ref().is_some_and(|p| p.index() >= upto)
            })
            .await?;
        Ok(upto)
    }

    /// The digest of every member's application state, by member id.
    pub fn digests(&self) -> anyhow::Result<BTreeMap<NodeId, u32>> {
        self.members
            .iter()
            .map(|(id, m)| Ok((*id, kv::digest(&m.group.db())?)))
            .collect()
    }
}

/// RocksDB's "lock hold by current process" / "No locks available" on opening a database.
fn is_lock_held(e: &rozone_raft::RaftGroupError) -> bool {
    let m = e.to_string();
    m.contains("lock hold") || m.contains("No locks available")
}

/// The harness with the key-value state machine.
pub type Cluster = RaftCluster<KvLogic>;

/// Writes `key=value` through the current leader, retrying on a leader change.
pub async fn put(c: &Cluster, key: &str, value: &str) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let leader = c.leader().await?;
        match leader
            .write(KvRequest::Put {
                key: key.to_string(),
                value: value.to_string(),
            })
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if e.is_retryable() && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}
