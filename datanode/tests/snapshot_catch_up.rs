//! A replica missing data is never counted healthy (issue 13, item 1, datanode side): a
//! pipeline member that falls behind a purged log catches up by installing the pipeline's
//! snapshot, which holds Raft metadata only. The containers whose entries it skipped are
//! marked UNHEALTHY (needing repair) and reported so; such a member never closes them with
//! a BCSID it does not hold. Full replicas agree on block count and content digest.

mod common;

use common::*;
use rozone_proto::datanode::ContainerState;
use rozone_proto::scm as spb;

/// Fails on 00e069b (run there without the digest assertions, which do not compile): the
/// member that installed the snapshot kept container 1 OPEN with one block of three (timed
/// out waiting for UNHEALTHY); nothing stopped the close entry from closing it at the full
/// BCSID.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_caught_up_by_snapshot_marks_skipped_containers_unhealthy_and_never_closes_them() {
    let mut c = Cluster::start_with(3, |cfg| cfg.raft.max_in_snapshot_log_to_keep = 0).await;
    let leader = c.create_pipeline(1, &[0, 1, 2]).await;
    let victim = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    let mut l = c.client(leader);
    l.write_block(1, 1, 1, &bytes(1, 9000), 4096).await.unwrap();
    c.wait_caught_up(1, leader, victim).await;
    let victim_id = c.nodes[victim].id;

    // The victim is down while container 1 gets two more blocks; the leader snapshots and
    // purges its log, so the victim can only catch up by snapshot.
    c.nodes[victim].stop().await;
    l.write_block(1, 1, 2, &bytes(2, 9000), 4096).await.unwrap();
    l.stream(1, 1, 3, &bytes(3, 7000), true, None)
        .await
        .unwrap();
    c.wait_caught_up(1, leader, other).await;
    let g = c.nodes[leader].dn().pipelines.get(1).unwrap().group.clone();
    let upto = g.snapshot_now(WAIT).await.unwrap();
    g.purge_log(upto).await.unwrap();
    g.wait_for(WAIT, "log purged", move |m| {
        m.purged.as_ref().is_some_and(|p| p.index() >= upto)
    })
    .await
    .unwrap();

    c.nodes[victim].start().await;
    let vstore = c.nodes[victim].dn().store.clone();
    wait_until("victim's container 1 marked UNHEALTHY", || {
        let vstore = vstore.clone();
        async move {
            vstore
                .descriptor(1)
                .filter(|d| d.state == rozone_datanode::types::ContainerState::Unhealthy)
        }
    })
    .await;
    let vg = c.nodes[victim].dn().pipelines.get(1).unwrap().group.clone();
    assert!(vg.snapshot_stats().installs >= 1, "caught up by snapshot");
    let scm = c.scm.clone();
    wait_until("victim reports container 1 UNHEALTHY", || {
        let scm = scm.clone();
        async move {
            scm.replica(victim_id, 1)
                .filter(|r| r.state == spb::ReplicaState::ReplicaUnhealthy as i32)
        }
    })
    .await;

    // The SCM closes container 1 through the pipeline: the full replicas close with equal
    // BCSID, block count and digest; the victim stays UNHEALTHY below that BCSID.
    for n in &c.nodes {
        c.scm.send(
            n.id,
            spb::scm_command::Command::CloseContainer(spb::CloseContainerCommand {
                container_id: 1,
                pipeline_id: 1,
                force: false,
            }),
        );
    }
    let mut closed = Vec::new();
    for i in [leader, other] {
        let cl = c.client(i);
        closed.push(
            wait_until("CLOSED on the full replicas", || {
                let mut cl = cl.clone();
                async move {
                    cl.container(1)
                        .await
                        .ok()
                        .filter(|d| d.state == ContainerState::Closed as i32)
                }
            })
            .await,
        );
    }
    let full = &closed[0];
    assert_eq!(full.block_count, 3);
    assert_eq!(full.digest_version, 1);
    assert_ne!(full.content_digest, 0);
    assert_eq!(
        (full.bcsid, full.block_count, full.content_digest),
        (
            closed[1].bcsid,
            closed[1].block_count,
            closed[1].content_digest
        )
    );
    c.wait_caught_up(1, leader, victim).await;
    let v = vstore.descriptor(1).unwrap();
    assert_eq!(v.state, rozone_datanode::types::ContainerState::Unhealthy);
    assert!(v.bcsid < full.bcsid, "{} < {}", v.bcsid, full.bcsid);
    assert_eq!(v.block_count, 1);
    assert_ne!(v.digest.sum, full.content_digest);
    let r = c.scm.replica(victim_id, 1).unwrap();
    assert_eq!(r.state, spb::ReplicaState::ReplicaUnhealthy as i32);
    assert!(r.bcsid < full.bcsid);
}
