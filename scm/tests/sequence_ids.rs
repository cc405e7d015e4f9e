//! Sequence ids across a leader change, on three SCM state machines in one process
//! (real Raft over gRPC on 127.0.0.1): the ids one leader's generator handed out and the
//! ids the next leader's fresh generator hands out never overlap, and the live members
//! hold identical SCM state afterwards.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rozone_kv::rocksdb::{IteratorMode, DB};
use rozone_raft::RaftGroup;
use rozone_scm::state::{
    read, ContainerInfo, ContainerState, PipelineInfo, PipelineState, ReplicationFactor, ScmLogic,
    ScmRequest, ScmResponse, SequenceIdGenerator, COLUMN_FAMILIES, SEQUENCE_NAMES,
    SEQ_CONTAINER_ID,
};

type Ring = rozone_tests::RaftCluster<ScmLogic>;

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
    let mut ring = Ring::start(3, Arc::new(|_| {})).await?;
    let result = scenario(&mut ring).await;
    // Always stop: RocksDB aborts if a database outlives the process.
    ring.stop_all().await?;
    result
}

async fn scenario(ring: &mut Ring) -> anyhow::Result<()> {
    let first_leader = ring.wait_ready_leader().await?;
    let leader = ring.member(first_leader)?.group.clone();
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
    ring.stop_member(first_leader).await?;

    let second_leader = ring.wait_ready_leader().await?;
    assert_ne!(second_leader, first_leader);
    let leader = ring.member(second_leader)?.group.clone();
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
