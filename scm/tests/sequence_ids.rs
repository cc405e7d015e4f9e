//! Sequence ids across a leader change, on three SCM state machines in one process
//! (real Raft over gRPC on 127.0.0.1): the ids one leader's generator handed out and the
//! ids the next leader's fresh generator hands out never overlap, and the live members
//! hold identical SCM state afterwards.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use rozone_kv::rocksdb::{IteratorMode, DB};
use rozone_raft::{GroupConfig, GroupRegistry, NodeId, NodeInfo, PeerChannels, RaftGroup};
use rozone_scm::state::{
    read, ContainerInfo, ContainerState, PipelineInfo, PipelineState, ReplicationFactor, ScmLogic,
    ScmRequest, ScmResponse, SequenceIdGenerator, COLUMN_FAMILIES, SEQUENCE_NAMES,
    SEQ_CONTAINER_ID,
};
use tokio::sync::oneshot;

/// Bound for every wait: readiness waits, never fixed sleeps.
const WAIT: Duration = Duration::from_secs(30);
const GROUP: &str = "scm";
const POLL: Duration = Duration::from_millis(20);

struct Member {
    group: Arc<RaftGroup<ScmLogic>>,
    stop_server: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

struct Ring {
    _root: tempfile::TempDir,
    members: BTreeMap<NodeId, Member>,
}

impl Ring {
    /// Starts `n` members on loopback and initialises the group on member 1.
    async fn start(n: u64) -> anyhow::Result<Self> {
        let root = tempfile::tempdir()?;
        let mut members = BTreeMap::new();
        let mut infos = BTreeMap::new();
        for id in 1..=n {
            let (listener, addr) = rozone_raft::server::bind("127.0.0.1:0").await?;
            let addr = addr.to_string();
            let info = NodeInfo::new(&addr, &addr);
            infos.insert(id, info.clone());
            let mut cfg = GroupConfig::new(GROUP, id, info, root.path().join(format!("n{id}")));
            cfg.election_timeout_min = Duration::from_millis(300);
            cfg.election_timeout_max = Duration::from_millis(600);
            cfg.heartbeat_interval = Duration::from_millis(100);
            let registry = GroupRegistry::default();
            let channels = Arc::new(PeerChannels::default());
            let group = RaftGroup::start(cfg, ScmLogic, &registry, channels).await?;
            let (tx, rx) = oneshot::channel();
            let server = tokio::spawn(async move {
                let _ = rozone_raft::server::serve_peer(listener, registry, async {
                    let _ = rx.await;
                })
                .await;
            });
            members.insert(
                id,
                Member {
                    group,
                    stop_server: Some(tx),
                    server: Some(server),
                },
            );
        }
        let ring = Self {
            _root: root,
            members,
        };
        ring.group(1)?.initialize(infos).await?;
        Ok(ring)
    }

    fn group(&self, id: NodeId) -> anyhow::Result<&Arc<RaftGroup<ScmLogic>>> {
        Ok(&self
            .members
            .get(&id)
            .with_context(|| format!("member {id} is not running"))?
            .group)
    }

    async fn wait_ready_leader(&self) -> anyhow::Result<NodeId> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some((id, _)) = self.members.iter().find(|(_, m)| m.group.is_ready_leader()) {
                return Ok(*id);
            }
            if tokio::time::Instant::now() > deadline {
                bail!("no ready leader among {:?}", self.members.keys());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Stops a member as a crash looks to the others, and waits until its databases are
    /// closed (every handle dropped).
    async fn stop(&mut self, id: NodeId) -> anyhow::Result<()> {
        let mut m = self
            .members
            .remove(&id)
            .with_context(|| format!("member {id} is not running"))?;
        if let Some(tx) = m.stop_server.take() {
            let _ = tx.send(());
        }
        m.group.shutdown().await;
        if let Some(s) = m.server.take() {
            // Peers keep append streams open; cut them instead of waiting for them.
            s.abort();
            let _ = s.await;
        }
        let weak = Arc::downgrade(&m.group);
        drop(m);
        let deadline = tokio::time::Instant::now() + WAIT;
        while weak.strong_count() > 0 {
            if tokio::time::Instant::now() > deadline {
                bail!("member {id} still referenced after stop");
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

    async fn stop_all(&mut self) -> anyhow::Result<()> {
        let ids: Vec<_> = self.members.keys().copied().collect();
        for id in ids {
            self.stop(id).await?;
        }
        Ok(())
    }

    /// Waits until the leader applied its whole log and every live member applied as far.
    async fn wait_converged(&self) -> anyhow::Result<()> {
        let leader = self.group(self.wait_ready_leader().await?)?;
        let idx = leader.wait_log_applied(WAIT).await?;
        for m in self.members.values() {
            m.group.wait_applied(idx, WAIT).await?;
        }
        Ok(())
    }
}

/// FNV-1a over every key and value of every SCM column family, in a fixed order.
fn digest(db: &DB) -> anyhow::Result<u64> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |b: &[u8]| {
        for byte in (b.len() as u64).to_be_bytes().iter().chain(b) {
            h ^= u64::from(*byte);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for cf_name in COLUMN_FAMILIES {
        feed(cf_name.as_bytes());
        for item in db.iterator_cf(rozone_kv::cf(db, cf_name)?, IteratorMode::Start) {
            let (k, v) = item?;
            feed(&k);
            feed(&v);
        }
    }
    Ok(h)
}

async fn allocate(
    g: &SequenceIdGenerator<Arc<RaftGroup<ScmLogic>>>,
    n: usize,
) -> anyhow::Result<Vec<u64>> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(g.next_id(SEQ_CONTAINER_ID).await?);
    }
    Ok(ids)
}

fn container(id: u64) -> ContainerInfo {
    ContainerInfo {
        id,
        state: ContainerState::Open,
        replication: ReplicationFactor::Three,
        owner: "om".into(),
        pipeline_id: 1,
        used_bytes: 0,
        key_count: 0,
        bcsid: 0,
        created_at: 1_700_000_000_000,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn new_leader_never_reissues_container_ids_and_members_agree() -> anyhow::Result<()> {
    let mut ring = Ring::start(3).await?;
    let result = scenario(&mut ring).await;
    // Always stop: RocksDB aborts if a database outlives the process.
    ring.stop_all().await?;
    result
}

async fn scenario(ring: &mut Ring) -> anyhow::Result<()> {
    let first_leader = ring.wait_ready_leader().await?;
    let leader = ring.group(first_leader)?.clone();
    assert_eq!(
        leader
            .write(ScmRequest::SetClusterId {
                cluster_id: "CID-test".into()
            })
            .await?,
        ScmResponse::ClusterIdSet {
            cluster_id: "CID-test".into()
        }
    );
    assert_eq!(
        leader
            .write(ScmRequest::CreatePipeline(PipelineInfo {
                id: 1,
                members: vec![11, 12, 13],
                leader: Some(11),
                state: PipelineState::Open,
            }))
            .await?,
        ScmResponse::PipelineCreated { id: 1 }
    );

    // Batches of 100: 250 ids take three batches, leaving 50 reserved but unused.
    let gen1 = SequenceIdGenerator::new(leader.clone(), 100);
    let before = allocate(&gen1, 250).await?;
    for id in [before[0], before[249]] {
        assert_eq!(
            leader
                .write(ScmRequest::CreateContainer(container(id)))
                .await?,
            ScmResponse::ContainerCreated { id }
        );
    }
    drop((gen1, leader));
    ring.stop(first_leader).await?;

    let second_leader = ring.wait_ready_leader().await?;
    assert_ne!(second_leader, first_leader);
    let leader = ring.group(second_leader)?.clone();
    // A fresh generator knows nothing: its first compare-and-set fails and teaches it the row.
    let gen2 = SequenceIdGenerator::new(leader.clone(), 100);
    let after = allocate(&gen2, 150).await?;
    for id in [after[0], after[149]] {
        assert_eq!(
            leader
                .write(ScmRequest::CreateContainer(container(id)))
                .await?,
            ScmResponse::ContainerCreated { id }
        );
    }
    drop((gen2, leader));

    let all: BTreeSet<u64> = before.iter().chain(&after).copied().collect();
    assert_eq!(
        all.len(),
        before.len() + after.len(),
        "an id was issued twice"
    );
    let max_before = before.iter().max().copied().unwrap_or(0);
    let min_after = after.iter().min().copied().unwrap_or(0);
    // The old leader's whole reserved batch (up to 300) is skipped, never reissued.
    assert!(
        min_after > 300 && min_after > max_before,
        "ranges overlap: before ..={max_before}, after {min_after}.."
    );

    ring.wait_converged().await?;
    let mut rows = BTreeMap::new();
    let mut digests = BTreeMap::new();
    for (id, m) in &ring.members {
        let db = m.group.db();
        let r: Vec<Option<u64>> = SEQUENCE_NAMES
            .iter()
            .map(|n| read::sequence_id(&db, n))
            .collect::<Result<_, _>>()?;
        rows.insert(*id, r);
        digests.insert(*id, digest(&db)?);
        assert_eq!(read::cluster_id(&db)?.as_deref(), Some("CID-test"));
        assert_eq!(read::containers(&db, None)?.len(), 4);
    }
    assert_eq!(ring.members.len(), 2);
    let row_sets: BTreeSet<_> = rows.values().collect();
    assert_eq!(row_sets.len(), 1, "sequence rows differ: {rows:?}");
    let digest_set: BTreeSet<_> = digests.values().collect();
    assert_eq!(digest_set.len(), 1, "state digests differ: {digests:?}");
    let container_row = rows
        .values()
        .next()
        .and_then(|r| r.first().copied().flatten());
    let max_after = after.iter().max().copied().unwrap_or(0);
    assert!(
        container_row.is_some_and(|r| r >= max_after),
        "row {container_row:?} below issued id {max_after}"
    );
    Ok(())
}
