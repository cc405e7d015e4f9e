//! Disk faults seen from the SCM (issue 13, item 3): a datanode whose every volume failed
//! gets no pipeline, no block and no new replica, and its pipelines close; one whose
//! volumes are full (no remaining space) gets no new blocks until it reports room again;
//! the replicas a failed volume held are reported gone and re-replicated elsewhere.

mod common;

use std::collections::BTreeSet;

use common::*;
use rozone_proto::scm as pb;
use rozone_proto::scm::scm_command::Command;
use rozone_proto::scm::ReplicaState as R;
use tonic::Code;

const ROOM: u64 = 1 << 39;

fn alloc() -> pb::AllocateBlockRequest {
    pb::AllocateBlockRequest {
        count: 1,
        owner: "om1".into(),
        ..Default::default()
    }
}

/// Fails on 15e8a35 (main): a volume's `failed` flag only left it out of the byte totals,
/// so datanode 3 (its only volume failed) was put in the first pipeline, {1, 2, 3}.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_or_full_volumes_get_no_pipelines_blocks_or_replicas_and_lost_replicas_are_copied() {
    let dir = tempfile::tempdir().unwrap();
    let scm = start_scm(dir.path(), |c| c.scm.max_pipelines_per_datanode = 1).await;
    let mut c = clients(&scm).await;
    let mut dns: Vec<FakeDn> = (1..=5).map(|i| FakeDn::new(i, &c)).collect();
    for d in dns.iter_mut() {
        let failed = d.id == 3;
        d.register_with(vec![volume(failed, if failed { 0 } else { ROOM })], vec![])
            .await;
    }

    // The one pipeline (one per datanode) leaves datanode 3 out.
    let b = eventually!("a block", { c.block.allocate_block(alloc()).await.ok() })
        .into_inner()
        .blocks
        .remove(0);
    let cid = b.block_id.unwrap().container_id;
    let members: BTreeSet<u64> = b.pipeline.unwrap().members.iter().map(|m| m.id).collect();
    assert!(
        !members.contains(&3),
        "pipeline on a failed datanode: {members:?}"
    );
    assert_eq!(members.len(), 3);
    for d in dns.iter_mut() {
        d.beat().await;
    }
    assert!(dns[2]
        .got(|x| matches!(x, Command::CreatePipeline(_)))
        .is_empty());
    let m: Vec<u64> = members.iter().copied().collect();

    // A member's only volume is full: no block goes to its pipeline; room again: it does.
    let full = m[0];
    dns[full as usize - 1]
        .beat_storage(vec![volume(false, 0)], vec![])
        .await;
    let e = c.block.allocate_block(alloc()).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    dns[full as usize - 1]
        .beat_storage(vec![volume(false, ROOM)], vec![])
        .await;
    c.block.allocate_block(alloc()).await.unwrap();

    // The container closes with three real copies.
    c.admin
        .close_container(pb::CloseContainerRequest { container_id: cid })
        .await
        .unwrap();
    for id in &m {
        dns[*id as usize - 1]
            .beat_with(vec![replica(cid, R::ReplicaClosed, 12, 5)], vec![])
            .await;
    }

    // A member's volume fails: its replica is reported gone, its pipeline closes, and the
    // new copy goes to the one datanode that can take it (not 3, not the failed member).
    let failed = m[1];
    let mut gone = replica(cid, R::ReplicaDeleted, 0, 0);
    gone.state = R::ReplicaDeleted as i32;
    dns[failed as usize - 1]
        .beat_storage(vec![volume(true, 0)], vec![gone])
        .await;
    let spare = (1..=5).find(|i| *i != 3 && !members.contains(i)).unwrap();
    let target = eventually!("a replicate command", {
        let mut found = None;
        for d in dns.iter_mut() {
            if d.id == failed {
                d.beat_storage(vec![volume(true, 0)], vec![]).await;
            } else {
                d.beat().await;
            }
            if !d
                .got(|x| matches!(x, Command::ReplicateContainer(r) if r.container_id == cid))
                .is_empty()
            {
                found = Some(d.id);
            }
        }
        found
    });
    assert_eq!(
        target, spare,
        "copy placed on a datanode without a working volume"
    );
    eventually!("the failed member's pipeline closed", {
        dns[m[0] as usize - 1].beat().await;
        (!dns[m[0] as usize - 1]
            .got(|x| matches!(x, Command::ClosePipeline(_)))
            .is_empty())
        .then_some(())
    });
    scm.stop().await;
}
