//! Unit tests of the apply stage and the replay guard (the pipeline state machine without
//! Raft).

use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use rozone_types::checksum::{ChecksumData, ChecksumType};

use super::*;
use crate::types::ContainerState;

fn setup(dir: &std::path::Path) -> PipelineLogic {
    let store = Arc::new(ContainerStore::open(&[dir.join("vol")], 0, false).unwrap());
    let state = Arc::new(PipelineState {
        id: 1,
        members: vec![],
        healthy: AtomicBool::new(true),
        reason: Mutex::new(None),
        snapshot_gap: AtomicBool::new(false),
        file: dir.join("pipeline.json"),
    });
    PipelineLogic {
        pipeline_id: 1,
        store,
        state,
        applied: None,
    }
}

fn chunk(data: &[u8]) -> ChunkInfo {
    ChunkInfo {
        offset: 0,
        len: data.len() as u64,
        checksum: ChecksumData::compute(ChecksumType::Crc32c, 512, data),
    }
}

#[test]
fn apply_is_idempotent_by_bcsid_and_never_recreates_a_deleted_container() {
    let d = tempfile::tempdir().unwrap();
    let l = setup(d.path());
    let block = BlockId {
        container_id: 5,
        local_id: 1,
    };
    let data = vec![3u8; 2000];
    let c = chunk(&data);
    // Apply without a write stage: the container does not exist, nothing is created.
    let r = l.apply_entry(
        1,
        &PipelineRequest::StreamInit {
            block,
            chunk: c.clone(),
        },
    );
    assert!(
        matches!(r, PipelineResponse::Refused(ref e) if e.code == DnCode::ContainerNotFound),
        "{r:?}"
    );
    assert!(l.store.descriptor(5).is_none());
    assert!(!l.state.is_healthy());
    assert!(l
        .state
        .unhealthy_reason()
        .unwrap()
        .contains("CONTAINER_NOT_FOUND"));
    assert!(d.path().join("pipeline.json").is_file(), "health persisted");

    let l = setup(&d.path().join("b"));
    l.store.write_chunk(1, block, &c, &data).unwrap();
    let b = BlockData {
        id: block,
        chunks: vec![c.clone()],
        length: 2000,
        bcsid: 0,
    };
    let entries = [
        PipelineRequest::WriteChunk {
            block,
            chunk: c.clone(),
        },
        PipelineRequest::PutBlock { block: b },
        PipelineRequest::CloseContainer { container_id: 5 },
    ];
    for (i, e) in entries.iter().enumerate() {
        assert!(matches!(
            l.apply_entry(i as u64 + 10, e),
            PipelineResponse::Ok { .. }
        ));
    }
    let closed = l.store.descriptor(5).unwrap();
    assert_eq!(
        (closed.state, closed.bcsid, closed.block_count),
        (ContainerState::Closed, 12, 1)
    );
    // Replaying the same entries changes nothing.
    for (i, e) in entries.iter().enumerate() {
        assert!(matches!(
            l.apply_entry(i as u64 + 10, e),
            PipelineResponse::Ok { .. }
        ));
    }
    assert_eq!(l.store.descriptor(5).unwrap(), closed);
    assert!(l.state.is_healthy());

    // Deleted: a tombstone stays; replay from any age is refused, write stage too.
    l.store.delete_container(5, true).unwrap();
    for (i, e) in entries.iter().enumerate() {
        let r = l.apply_entry(i as u64 + 10, e);
        assert!(
            matches!(r, PipelineResponse::Refused(ref e) if e.code == DnCode::ContainerNotFound),
            "{r:?}"
        );
    }
    assert_eq!(
        l.store.descriptor(5).unwrap().state,
        ContainerState::Deleted
    );
    let e = l.store.write_chunk(1, block, &c, &data).unwrap_err();
    assert_eq!(e.code, DnCode::ContainerNotFound);
    assert!(!l.state.is_healthy());
}

/// A close for a container this member never held (no descriptor, no tombstone) is a
/// no-op that leaves the pipeline healthy: a leader that caught up by snapshot proposes
/// such closes for containers the other members hold.
///
/// Fails on 0e32de5 (main): the apply refused it with CONTAINER_NOT_FOUND and marked the
/// pipeline unhealthy.
#[test]
fn closing_a_container_never_held_here_is_a_no_op_that_keeps_the_pipeline_healthy() {
    let d = tempfile::tempdir().unwrap();
    let l = setup(d.path());
    let r = l.apply_entry(7, &PipelineRequest::CloseContainer { container_id: 42 });
    assert!(matches!(r, PipelineResponse::Ok { bcsid: 0, .. }), "{r:?}");
    assert!(l.store.descriptor(42).is_none(), "nothing created");
    assert!(l.state.is_healthy(), "{:?}", l.state.unhealthy_reason());
}

#[test]
fn store_reopens_and_marks_damaged_containers_unhealthy() {
    let d = tempfile::tempdir().unwrap();
    let block = BlockId {
        container_id: 8,
        local_id: 2,
    };
    let data = vec![9u8; 1000];
    let c = chunk(&data);
    {
        let l = setup(d.path());
        l.store.write_chunk(1, block, &c, &data).unwrap();
        let b = BlockData {
            id: block,
            chunks: vec![c.clone()],
            length: 1000,
            bcsid: 0,
        };
        assert!(matches!(
            l.apply_entry(3, &PipelineRequest::StreamWithBlock { block: b }),
            PipelineResponse::Ok { bcsid: 3, .. }
        ));
    }
    let l = setup(d.path());
    assert_eq!(l.store.descriptor(8).unwrap().bcsid, 3);
    assert_eq!(l.store.get_block(block).unwrap().length, 1000);
    drop(l);
    // Truncate the block file: the replica is UNHEALTHY after restart and not served.
    let f = d.path().join("vol/containers/8/chunks/2.block");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .unwrap()
        .set_len(10)
        .unwrap();
    let l = setup(d.path());
    assert_eq!(
        l.store.descriptor(8).unwrap().state,
        ContainerState::Unhealthy
    );
    assert_eq!(
        l.store.read(block, 0, 0).unwrap_err().code,
        DnCode::ContainerUnhealthy
    );
}

/// A well-formed PutBlock naming chunks this replica never committed (the leader checked
/// them) means the replica is short: it is marked UNHEALTHY, never silently refused.
///
/// Fails on 00e069b: the entry was refused as INVALID_ARGUMENT ("chunk [3000, 3100) was
/// never written") and the container stayed OPEN, for a later close to stamp.
#[test]
fn a_put_block_whose_chunks_this_replica_lacks_marks_the_container_unhealthy() {
    let d = tempfile::tempdir().unwrap();
    let l = setup(d.path());
    let block = BlockId {
        container_id: 6,
        local_id: 1,
    };
    let data = vec![5u8; 3000];
    let c = chunk(&data);
    l.store.write_chunk(1, block, &c, &data).unwrap();
    assert!(matches!(
        l.apply_entry(
            4,
            &PipelineRequest::WriteChunk {
                block,
                chunk: c.clone()
            }
        ),
        PipelineResponse::Ok { .. }
    ));
    // A second chunk this member never received (its entry was in a skipped range).
    let missing = ChunkInfo {
        offset: 3000,
        ..chunk(&[7u8; 100])
    };
    let b = BlockData {
        id: block,
        chunks: vec![c, missing],
        length: 3100,
        bcsid: 0,
    };
    let r = l.apply_entry(9, &PipelineRequest::PutBlock { block: b });
    assert!(
        matches!(r, PipelineResponse::Refused(ref e) if e.code == DnCode::ContainerUnhealthy),
        "{r:?}"
    );
    let desc = l.store.descriptor(6).unwrap();
    assert_eq!(desc.state, ContainerState::Unhealthy);
    assert_eq!(
        desc.bcsid, 4,
        "never the BCSID of an entry it could not apply"
    );
    // The close that follows does not stamp it.
    let r = l.apply_entry(10, &PipelineRequest::CloseContainer { container_id: 6 });
    assert!(matches!(r, PipelineResponse::Refused(_)), "{r:?}");
    assert_eq!(
        l.store.descriptor(6).unwrap().state,
        ContainerState::Unhealthy
    );
}

/// Golden bytes of every [`PipelineRequest`] variant: pipeline entries committed by earlier
/// builds must decode, and this build must write them the same way. `kind()` is an
/// exhaustive match, so a new variant is named there and needs a sample here.
#[test]
fn every_pipeline_request_variant_matches_its_golden_bytes() {
    let block = BlockId::new(5, 9);
    let c = chunk(b"golden bytes");
    let data = BlockData {
        id: block,
        chunks: vec![c.clone()],
        length: c.len,
        bcsid: 44,
    };
    let samples: Vec<(&str, PipelineRequest)> = vec![
        PipelineRequest::WriteChunk {
            block,
            chunk: c.clone(),
        },
        PipelineRequest::PutBlock {
            block: data.clone(),
        },
        PipelineRequest::StreamInit { block, chunk: c },
        PipelineRequest::StreamWithBlock { block: data },
        PipelineRequest::CloseContainer { container_id: 5 },
    ]
    .into_iter()
    .map(|r| (r.kind(), r))
    .collect();
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/pipeline-requests-v1.txt");
    rozone_raft::golden::check(&path, &samples, rozone_raft::envelope::seal, |b| {
        rozone_raft::envelope::open(b, "pipeline request")
    });
}
