//! [`ScmLogic`]: how each SCM applies a committed [`ScmRequest`] to its state.
//!
//! Every decision reads only rows of this state (through the batch's `Txn`, so an entry
//! sees earlier entries of the same batch) and fields of the request, so every member
//! reaches the same answer. An `Err` is reserved for local storage failures (including
//! stored bytes that do not decode): it stops this Raft node rather than letting it diverge.

use std::io;

use rozone_kv::u64_key;
use rozone_raft::codec::encode;
use rozone_raft::{LogId, Rows, StateMachineLogic, Txn};

use super::request::{ScmRequest, ScmResponse};
use super::types::{ContainerInfo, ContainerState, DeletedBlocksTxn, PipelineInfo, PipelineState};
use super::{
    is_sequence_name, CF_CLUSTER, CF_CONTAINERS, CF_DELETED_BLOCKS, CF_PIPELINES, CF_SEQUENCE_IDS,
    COLUMN_FAMILIES, KEY_CLUSTER_ID,
};

/// The SCM state machine. Stateless in memory: everything lives in the database, so a
/// snapshot install needs no rebuild.
#[derive(Debug, Default, Clone, Copy)]
pub struct ScmLogic;

impl StateMachineLogic for ScmLogic {
    type Request = ScmRequest;
    type Response = ScmResponse;

    fn column_families(&self) -> Vec<&'static str> {
        COLUMN_FAMILIES.to_vec()
    }

    fn apply(
        &mut self,
        txn: &mut Txn<'_>,
        _log_id: &LogId,
        req: ScmRequest,
    ) -> io::Result<ScmResponse> {
        match req {
            ScmRequest::SetClusterId { cluster_id } => set_cluster_id(txn, cluster_id),
            ScmRequest::AllocateBatch {
                name,
                expected_last,
                new_last,
            } => allocate_batch(txn, name, expected_last, new_last),
            ScmRequest::CreateContainer(info) => create_container(txn, info),
            ScmRequest::UpdateContainer { id, event } => {
                let Some(mut c) = get_container(txn, id)? else {
                    return Ok(ScmResponse::ContainerNotFound { id });
                };
                let Some(next) = c.state.next(event) else {
                    return Ok(ScmResponse::InvalidTransition {
                        id,
                        from: c.state,
                        event,
                    });
                };
                c.state = next;
                put_container(txn, &c)?;
                Ok(ScmResponse::ContainerUpdated { id, state: next })
            }
            ScmRequest::UpdateContainerUsage {
                id,
                used_bytes,
                key_count,
                bcsid,
            } => {
                let Some(mut c) = get_container(txn, id)? else {
                    return Ok(ScmResponse::ContainerNotFound { id });
                };
                // A stale report must not lower the BCSID: replication decisions trust it
                // to say which replicas have every committed block.
                if bcsid < c.bcsid {
                    return Ok(ScmResponse::BcsidRegression {
                        id,
                        current: c.bcsid,
                        requested: bcsid,
                    });
                }
                c.used_bytes = used_bytes;
                c.key_count = key_count;
                c.bcsid = bcsid;
                put_container(txn, &c)?;
                Ok(ScmResponse::UsageUpdated { id, bcsid })
            }
            ScmRequest::CreatePipeline(p) => {
                let id = p.id;
                if let Err(reason) = p.validate() {
                    return Ok(ScmResponse::InvalidPipeline { id, reason });
                }
                if get_pipeline(txn, id)?.is_some() {
                    return Ok(ScmResponse::PipelineExists { id });
                }
                put_pipeline(txn, &p)?;
                Ok(ScmResponse::PipelineCreated { id })
            }
            ScmRequest::ClosePipeline { id } => {
                let Some(mut p) = get_pipeline(txn, id)? else {
                    return Ok(ScmResponse::PipelineNotFound { id });
                };
                if p.state != PipelineState::Closed {
                    p.state = PipelineState::Closed;
                    put_pipeline(txn, &p)?;
                }
                Ok(ScmResponse::PipelineClosed { id })
            }
            ScmRequest::AddDeletedBlocks {
                txn_id,
                container_id,
                local_ids,
            } => {
                let key = u64_key(txn_id);
                if txn.get(CF_DELETED_BLOCKS, &key)?.is_some() {
                    return Ok(ScmResponse::DeletedBlocksTxnExists { txn_id });
                }
                let row = DeletedBlocksTxn {
                    txn_id,
                    container_id,
                    local_ids,
                };
                txn.put(CF_DELETED_BLOCKS, key, encode(&row)?);
                Ok(ScmResponse::DeletedBlocksAdded { txn_id })
            }
            ScmRequest::RemoveDeletedBlocks { txn_ids } => {
                let mut removed = 0;
                for t in txn_ids {
                    let key = u64_key(t);
                    if txn.get(CF_DELETED_BLOCKS, &key)?.is_some() {
                        txn.delete(CF_DELETED_BLOCKS, key);
                        removed += 1;
                    }
                }
                Ok(ScmResponse::DeletedBlocksRemoved { removed })
            }
            ScmRequest::RecordDatanode(rec) => super::registry::record_datanode(txn, rec),
            ScmRequest::RecordSafeModeLeft { term } => {
                super::registry::record_safe_mode_left(txn, term)
            }
        }
    }
}

fn set_cluster_id(txn: &mut Txn<'_>, cluster_id: String) -> io::Result<ScmResponse> {
    let existing: Option<String> = txn.get_row(CF_CLUSTER, KEY_CLUSTER_ID)?;
    match existing {
        Some(e) if e != cluster_id => Ok(ScmResponse::ClusterIdMismatch { existing: e }),
        Some(_) => Ok(ScmResponse::ClusterIdSet { cluster_id }),
        None => {
            txn.put(CF_CLUSTER, KEY_CLUSTER_ID, encode(&cluster_id)?);
            Ok(ScmResponse::ClusterIdSet { cluster_id })
        }
    }
}

/// The compare-and-set every member judges against its own row; rows only ever change
/// here, so members that applied the same log hold the same rows.
fn allocate_batch(
    txn: &mut Txn<'_>,
    name: String,
    expected_last: u64,
    new_last: u64,
) -> io::Result<ScmResponse> {
    if !is_sequence_name(&name) {
        return Ok(ScmResponse::UnknownSequence { name });
    }
    if new_last <= expected_last {
        return Ok(ScmResponse::InvalidBatch {
            name,
            expected_last,
            new_last,
        });
    }
    let current: u64 = txn.get_row(CF_SEQUENCE_IDS, name.as_bytes())?.unwrap_or(0);
    if current != expected_last {
        return Ok(ScmResponse::CasFailed { name, current });
    }
    txn.put(CF_SEQUENCE_IDS, name.as_bytes(), encode(&new_last)?);
    Ok(ScmResponse::BatchAllocated {
        name,
        first: expected_last + 1,
        last: new_last,
    })
}

fn create_container(txn: &mut Txn<'_>, info: ContainerInfo) -> io::Result<ScmResponse> {
    let id = info.id;
    if info.state != ContainerState::Open {
        return Ok(ScmResponse::InvalidContainer {
            id,
            reason: format!("a new container must be OPEN, not {}", info.state),
        });
    }
    if get_container(txn, id)?.is_some() {
        return Ok(ScmResponse::ContainerExists { id });
    }
    put_container(txn, &info)?;
    Ok(ScmResponse::ContainerCreated { id })
}

fn get_container(txn: &Txn<'_>, id: u64) -> io::Result<Option<ContainerInfo>> {
    txn.get_row(CF_CONTAINERS, &u64_key(id))
}

fn put_container(txn: &mut Txn<'_>, c: &ContainerInfo) -> io::Result<()> {
    txn.put(CF_CONTAINERS, u64_key(c.id), encode(c)?);
    Ok(())
}

fn get_pipeline(txn: &Txn<'_>, id: u64) -> io::Result<Option<PipelineInfo>> {
    txn.get_row(CF_PIPELINES, &u64_key(id))
}

fn put_pipeline(txn: &mut Txn<'_>, p: &PipelineInfo) -> io::Result<()> {
    txn.put(CF_PIPELINES, u64_key(p.id), encode(p)?);
    Ok(())
}

#[cfg(test)]
mod tests {
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
    fn container_lifecycle_allows_only_listed_transitions() {
        use ContainerEvent as E;
        use ContainerState as S;
        let allowed = [
            (S::Open, E::Finalize, S::Closing),
            (S::Closing, E::QuasiClose, S::QuasiClosed),
            (S::Closing, E::Close, S::Closed),
            (S::QuasiClosed, E::Close, S::Closed),
            (S::Closed, E::Delete, S::Deleting),
            (S::Deleting, E::Cleanup, S::Deleted),
        ];
        // A path to each state from OPEN, to put a fresh container in it.
        let path_to = |s: S| -> Vec<E> {
            match s {
                S::Open => vec![],
                S::Closing => vec![E::Finalize],
                S::QuasiClosed => vec![E::Finalize, E::QuasiClose],
                S::Closed => vec![E::Finalize, E::Close],
                S::Deleting => vec![E::Finalize, E::Close, E::Delete],
                S::Deleted => vec![E::Finalize, E::Close, E::Delete, E::Cleanup],
            }
        };
        let mut f = fixture();
        let mut next_id = 1;
        for from in S::ALL {
            for event in E::ALL {
                let id = next_id;
                next_id += 1;
                assert_eq!(
                    f.apply(ScmRequest::CreateContainer(container(id))),
                    ScmResponse::ContainerCreated { id }
                );
                for e in path_to(from) {
                    assert!(matches!(
                        f.apply(ScmRequest::UpdateContainer { id, event: e }),
                        ScmResponse::ContainerUpdated { .. }
                    ));
                }
                let before = read::container(&f.db, id).unwrap().unwrap();
                assert_eq!(before.state, from);
                let resp = f.apply(ScmRequest::UpdateContainer { id, event });
                let after = read::container(&f.db, id).unwrap().unwrap();
                match allowed.iter().find(|(s, e, _)| *s == from && *e == event) {
                    Some((_, _, to)) => {
                        assert_eq!(resp, ScmResponse::ContainerUpdated { id, state: *to });
                        assert_eq!(after.state, *to);
                    }
                    None => {
                        assert_eq!(resp, ScmResponse::InvalidTransition { id, from, event });
                        assert_eq!(after, before, "{from} + {event:?} changed the container");
                    }
                }
            }
        }
        assert_eq!(
            f.apply(ScmRequest::UpdateContainer {
                id: 999,
                event: E::Finalize
            }),
            ScmResponse::ContainerNotFound { id: 999 }
        );
        let deleted = read::containers(&f.db, Some(S::Deleted)).unwrap();
        assert!(deleted.iter().all(|c| c.state == S::Deleted));
        assert_eq!(
            read::containers(&f.db, None).unwrap().len(),
            S::ALL.len() * E::ALL.len()
        );
    }

    #[test]
    fn create_container_needs_new_id_and_open_state() {
        let mut f = fixture();
        assert_eq!(
            f.apply(ScmRequest::CreateContainer(container(1))),
            ScmResponse::ContainerCreated { id: 1 }
        );
        let mut again = container(1);
        again.owner = "other".into();
        assert_eq!(
            f.apply(ScmRequest::CreateContainer(again)),
            ScmResponse::ContainerExists { id: 1 }
        );
        assert_eq!(read::container(&f.db, 1).unwrap().unwrap().owner, "om1");
        let mut closed = container(2);
        closed.state = ContainerState::Closed;
        assert!(matches!(
            f.apply(ScmRequest::CreateContainer(closed)),
            ScmResponse::InvalidContainer { id: 2, .. }
        ));
        assert_eq!(read::container(&f.db, 2).unwrap(), None);
    }

    #[test]
    fn bcsid_never_goes_backwards() {
        let mut f = fixture();
        f.apply(ScmRequest::CreateContainer(container(1)));
        let usage = |used_bytes, key_count, bcsid| ScmRequest::UpdateContainerUsage {
            id: 1,
            used_bytes,
            key_count,
            bcsid,
        };
        assert_eq!(
            f.apply(usage(100, 2, 10)),
            ScmResponse::UsageUpdated { id: 1, bcsid: 10 }
        );
        // Same BCSID is allowed (a repeated report); a lower one changes nothing.
        assert_eq!(
            f.apply(usage(120, 3, 10)),
            ScmResponse::UsageUpdated { id: 1, bcsid: 10 }
        );
        assert_eq!(
            f.apply(usage(50, 1, 9)),
            ScmResponse::BcsidRegression {
                id: 1,
                current: 10,
                requested: 9
            }
        );
        let c = read::container(&f.db, 1).unwrap().unwrap();
        assert_eq!((c.used_bytes, c.key_count, c.bcsid), (120, 3, 10));
        assert_eq!(
            f.apply(ScmRequest::UpdateContainerUsage {
                id: 2,
                used_bytes: 0,
                key_count: 0,
                bcsid: 0
            }),
            ScmResponse::ContainerNotFound { id: 2 }
        );
    }

    fn pipeline(id: u64, members: Vec<u64>, leader: Option<u64>) -> PipelineInfo {
        PipelineInfo {
            id,
            members,
            leader,
            state: PipelineState::Open,
        }
    }

    #[test]
    fn pipelines_need_three_distinct_members_and_close_idempotently() {
        let mut f = fixture();
        for bad in [
            pipeline(1, vec![1, 2], None),
            pipeline(1, vec![1, 2, 3, 4], None),
            pipeline(1, vec![1, 2, 2], None),
            pipeline(1, vec![1, 2, 3], Some(9)),
            PipelineInfo {
                state: PipelineState::Closed,
                ..pipeline(1, vec![1, 2, 3], None)
            },
        ] {
            assert!(
                matches!(
                    f.apply(ScmRequest::CreatePipeline(bad.clone())),
                    ScmResponse::InvalidPipeline { id: 1, .. }
                ),
                "{bad:?} accepted"
            );
        }
        assert_eq!(read::pipelines(&f.db).unwrap(), vec![]);
        let good = pipeline(1, vec![1, 2, 3], Some(2));
        assert_eq!(
            f.apply(ScmRequest::CreatePipeline(good.clone())),
            ScmResponse::PipelineCreated { id: 1 }
        );
        assert_eq!(
            f.apply(ScmRequest::CreatePipeline(pipeline(1, vec![4, 5, 6], None))),
            ScmResponse::PipelineExists { id: 1 }
        );
        assert_eq!(read::pipeline(&f.db, 1).unwrap(), Some(good));
        for _ in 0..2 {
            assert_eq!(
                f.apply(ScmRequest::ClosePipeline { id: 1 }),
                ScmResponse::PipelineClosed { id: 1 }
            );
        }
        assert_eq!(
            read::pipeline(&f.db, 1).unwrap().unwrap().state,
            PipelineState::Closed
        );
        assert_eq!(
            f.apply(ScmRequest::ClosePipeline { id: 2 }),
            ScmResponse::PipelineNotFound { id: 2 }
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
}
