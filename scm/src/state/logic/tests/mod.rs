//! Tests of [`super::ScmLogic`] over a real RocksDB: sequence batches, the cluster id,
//! deleted-block transactions and corrupt rows here; containers and pipelines in
//! [`containers`].

mod containers;

use std::sync::Arc;

use rozone_kv::rocksdb::DB;
use rozone_raft::LogId;

use super::*;
use crate::state::read;
use crate::state::types::{ContainerEvent, ReplicationFactor};
use crate::state::{SEQ_CONTAINER_ID, SEQ_LOCAL_ID};

struct Fixture {
    _dir: tempfile::TempDir,
    db: Arc<DB>,
    logic: ScmLogic,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = rozone_kv::open(dir.path(), &COLUMN_FAMILIES, &Default::default()).unwrap();
    Fixture {
        _dir: dir,
        db,
        logic: ScmLogic,
    }
}

impl Fixture {
    /// Applies one request in its own batch and writes it, as the state machine does.
    fn apply(&mut self, req: ScmRequest) -> ScmResponse {
        let mut txn = Txn::new(&self.db);
        let resp = self.logic.apply(&mut txn, &test_log_id(), req).unwrap();
        self.db.write(txn.into_batch().unwrap()).unwrap();
        resp
    }

    fn try_apply(&mut self, req: ScmRequest) -> io::Result<ScmResponse> {
        let mut txn = Txn::new(&self.db);
        self.logic.apply(&mut txn, &test_log_id(), req)
    }
}

fn test_log_id() -> LogId {
    rozone_raft::types::log_id(1, 1, 1)
}

fn container(id: u64) -> ContainerInfo {
    ContainerInfo {
        id,
        state: ContainerState::Open,
        replication: ReplicationFactor::Three,
        owner: "om1".into(),
        pipeline_id: 7,
        used_bytes: 0,
        key_count: 0,
        bcsid: 0,
        created_at: 1_700_000_000_000,
    }
}

fn alloc(name: &str, expected_last: u64, new_last: u64) -> ScmRequest {
    ScmRequest::AllocateBatch {
        name: name.into(),
        expected_last,
        new_last,
    }
}

#[test]
fn allocate_batch_is_compare_and_set_from_absent_zero() {
    let mut f = fixture();
    assert_eq!(read::sequence_id(&f.db, SEQ_CONTAINER_ID).unwrap(), None);
    assert_eq!(
        f.apply(alloc(SEQ_CONTAINER_ID, 0, 1000)),
        ScmResponse::BatchAllocated {
            name: SEQ_CONTAINER_ID.into(),
            first: 1,
            last: 1000
        }
    );
    // A stale expectation fails and reports the row, which stays put.
    assert_eq!(
        f.apply(alloc(SEQ_CONTAINER_ID, 0, 1000)),
        ScmResponse::CasFailed {
            name: SEQ_CONTAINER_ID.into(),
            current: 1000
        }
    );
    assert_eq!(
        f.apply(alloc(SEQ_CONTAINER_ID, 1000, 1500)),
        ScmResponse::BatchAllocated {
            name: SEQ_CONTAINER_ID.into(),
            first: 1001,
            last: 1500
        }
    );
    assert_eq!(
        read::sequence_id(&f.db, SEQ_CONTAINER_ID).unwrap(),
        Some(1500)
    );
    // Rows are independent per name.
    assert_eq!(read::sequence_id(&f.db, SEQ_LOCAL_ID).unwrap(), None);
}

#[test]
fn allocate_batch_refuses_unknown_names_and_empty_batches() {
    let mut f = fixture();
    assert_eq!(
        f.apply(alloc("containerID", 0, 10)),
        ScmResponse::UnknownSequence {
            name: "containerID".into()
        }
    );
    for new_last in [0, 5] {
        assert!(matches!(
            f.apply(alloc(SEQ_LOCAL_ID, 5, new_last)),
            ScmResponse::InvalidBatch { .. }
        ));
    }
    assert_eq!(read::sequence_id(&f.db, SEQ_LOCAL_ID).unwrap(), None);
}

#[test]
fn entries_of_one_batch_see_each_other() {
    // Two allocations in one applied batch: the second must see the first's row.
    let f = fixture();
    let mut logic = ScmLogic;
    let mut txn = Txn::new(&f.db);
    let id = test_log_id();
    logic
        .apply(&mut txn, &id, alloc(SEQ_CONTAINER_ID, 0, 10))
        .unwrap();
    let r = logic
        .apply(&mut txn, &id, alloc(SEQ_CONTAINER_ID, 0, 10))
        .unwrap();
    assert_eq!(
        r,
        ScmResponse::CasFailed {
            name: SEQ_CONTAINER_ID.into(),
            current: 10
        }
    );
}

#[test]
fn cluster_id_is_set_once() {
    let mut f = fixture();
    assert_eq!(read::cluster_id(&f.db).unwrap(), None);
    let set = |id: &str| ScmRequest::SetClusterId {
        cluster_id: id.into(),
    };
    assert_eq!(
        f.apply(set("CID-a")),
        ScmResponse::ClusterIdSet {
            cluster_id: "CID-a".into()
        }
    );
    // Setting the same id again is harmless (a retried proposal).
    assert_eq!(
        f.apply(set("CID-a")),
        ScmResponse::ClusterIdSet {
            cluster_id: "CID-a".into()
        }
    );
    assert_eq!(
        f.apply(set("CID-b")),
        ScmResponse::ClusterIdMismatch {
            existing: "CID-a".into()
        }
    );
    assert_eq!(read::cluster_id(&f.db).unwrap().as_deref(), Some("CID-a"));
}

#[test]
fn deleted_block_txns_are_added_once_and_removed() {
    let mut f = fixture();
    let add = |txn_id, container_id| ScmRequest::AddDeletedBlocks {
        txn_id,
        container_id,
        local_ids: vec![txn_id * 10, txn_id * 10 + 1],
    };
    for t in [3, 1, 2] {
        assert_eq!(
            f.apply(add(t, 100 + t)),
            ScmResponse::DeletedBlocksAdded { txn_id: t }
        );
    }
    assert_eq!(
        f.apply(add(2, 999)),
        ScmResponse::DeletedBlocksTxnExists { txn_id: 2 }
    );
    let pending = read::pending_deleted_blocks(&f.db, 10).unwrap();
    let ids: Vec<_> = pending.iter().map(|t| t.txn_id).collect();
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(pending[1].container_id, 102);
    assert_eq!(read::pending_deleted_blocks(&f.db, 2).unwrap().len(), 2);
    assert_eq!(
        f.apply(ScmRequest::RemoveDeletedBlocks {
            txn_ids: vec![1, 3, 42]
        }),
        ScmResponse::DeletedBlocksRemoved { removed: 2 }
    );
    let ids: Vec<_> = read::pending_deleted_blocks(&f.db, 10)
        .unwrap()
        .into_iter()
        .map(|t| t.txn_id)
        .collect();
    assert_eq!(ids, [2]);
}

#[test]
fn corrupt_stored_rows_are_errors_not_panics() {
    let mut f = fixture();
    f.apply(ScmRequest::CreateContainer(container(1)));
    let put = |cf_name: &str, key: &[u8], v: &[u8]| {
        f.db.put_cf(rozone_kv::cf(&f.db, cf_name).unwrap(), key, v)
            .unwrap();
    };
    // An enum tag out of range and a truncated record.
    put(CF_CONTAINERS, &u64_key(1), &[1, 9]);
    put(CF_PIPELINES, &u64_key(5), &[5]);
    put(CF_SEQUENCE_IDS, SEQ_CONTAINER_ID.as_bytes(), &[0xff]);
    put(CF_CLUSTER, KEY_CLUSTER_ID, &[0x80]);
    put(CF_DELETED_BLOCKS, &u64_key(1), &[1]);
    put(CF_CONTAINERS, b"short", &[]);

    let bad = |r: io::Result<ScmResponse>| {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        e.to_string()
    };
    let msg = bad(f.try_apply(ScmRequest::UpdateContainer {
        id: 1,
        event: ContainerEvent::Finalize,
    }));
    assert!(msg.contains("containers"), "{msg}");
    bad(f.try_apply(ScmRequest::ClosePipeline { id: 5 }));
    bad(f.try_apply(alloc(SEQ_CONTAINER_ID, 0, 10)));
    bad(f.try_apply(ScmRequest::SetClusterId {
        cluster_id: "x".into(),
    }));

    let kind = |e: io::Error| e.kind();
    assert_eq!(
        read::container(&f.db, 1).map_err(kind).unwrap_err(),
        io::ErrorKind::InvalidData
    );
    assert!(read::containers(&f.db, None).is_err());
    assert!(read::pipeline(&f.db, 5).is_err());
    assert!(read::pipelines(&f.db).is_err());
    assert!(read::sequence_id(&f.db, SEQ_CONTAINER_ID).is_err());
    assert!(read::cluster_id(&f.db).is_err());
    assert!(read::pending_deleted_blocks(&f.db, 10).is_err());
}
