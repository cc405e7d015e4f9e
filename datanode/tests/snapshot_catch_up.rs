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
    // The install counter moves at the end of the install, which may come after the
    // container was marked: wait for it (read once, it failed under load).
    let g1 = vg.clone();
    wait_until("victim caught up by snapshot", || {
        let g1 = g1.clone();
        async move { (g1.snapshot_stats().installs >= 1).then_some(()) }
    })
    .await;
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

/// A pipeline leader that caught up by snapshot (so it never saw container 2 created) must
/// still close container 2 where the other members hold it: the close goes through the log
/// and is a no-op on the leader, which never held the container. The "caught up by snapshot"
/// mark survives a restart. Nothing poisons the pipeline, which keeps taking writes.
///
/// Fails on 0e32de5 (main): the new leader answered "close of a container never written
/// here: nothing to close" and the full replicas stayed OPEN (timed out waiting for CLOSED),
/// so the SCM would have kept the container CLOSING for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_caught_up_by_snapshot_closes_a_container_it_never_saw_on_the_members_holding_it()
{
    let mut c = Cluster::start_with(3, |cfg| cfg.raft.max_in_snapshot_log_to_keep = 0).await;
    let leader = c.create_pipeline(1, &[0, 1, 2]).await;
    let victim = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    c.wait_caught_up(1, leader, victim).await;
    let victim_id = c.nodes[victim].id;

    // Container 2 is created and written while the victim is down; the log is purged.
    c.nodes[victim].stop().await;
    let mut l = c.client(leader);
    l.write_block(1, 2, 1, &bytes(21, 9000), 4096)
        .await
        .unwrap();
    l.write_block(1, 2, 2, &bytes(22, 5000), 4096)
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
    c.wait_caught_up(1, leader, victim).await;
    let vp = c.nodes[victim].dn().pipelines.get(1).unwrap();
    // The install counter and the mark move at the end of the install, which may come
    // after the applied index is reported: wait for them.
    let p = vp.clone();
    wait_until("victim caught up by snapshot and marked", || {
        let p = p.clone();
        async move { (p.group.snapshot_stats().installs >= 1 && p.state.snapshot_gap()).then_some(()) }
    })
    .await;
    assert!(c.nodes[victim].dn().store.descriptor(2).is_none());
    drop((vp, p));
    // A restart keeps the mark (it is in pipeline.json).
    c.nodes[victim].stop().await;
    c.nodes[victim].start().await;
    c.wait_caught_up(1, leader, victim).await;
    assert!(c.nodes[victim]
        .dn()
        .pipelines
        .get(1)
        .unwrap()
        .state
        .snapshot_gap());

    // The victim becomes the pipeline's leader. A transfer can lose its election on a
    // loaded machine (another member times out first and wins): whoever leads then is
    // asked again, until the victim leads.
    let vg = c.nodes[victim].dn().pipelines.get(1).unwrap().group.clone();
    let groups: Vec<_> = (0..3)
        .map(|i| c.nodes[i].dn().pipelines.get(1).unwrap().group.clone())
        .collect();
    let deadline = std::time::Instant::now() + 3 * WAIT;
    while !vg.is_ready_leader() {
        assert!(
            std::time::Instant::now() < deadline,
            "the victim never led pipeline 1"
        );
        if let Some(l) = groups.iter().find(|g| g.is_ready_leader()) {
            let _ = l.transfer_leader(victim_id).await;
        }
        let _ = vg
            .wait_for(
                std::time::Duration::from_secs(3),
                "victim leads",
                move |m| m.current_leader == Some(victim_id),
            )
            .await;
        // Poll: a leader becomes ready once it applied an entry of its term.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        if vg.is_ready_leader() {
            break;
        }
    }
    drop(groups);

    // The SCM closes container 2: every member runs the command, the victim leads it.
    let ids: Vec<(u64, u64)> = c
        .nodes
        .iter()
        .map(|n| {
            let id = c.scm.send(
                n.id,
                spb::scm_command::Command::CloseContainer(spb::CloseContainerCommand {
                    container_id: 2,
                    pipeline_id: 1,
                    force: false,
                }),
            );
            (n.id, id)
        })
        .collect();
    let mut closed = Vec::new();
    for i in [leader, other] {
        let cl = c.client(i);
        closed.push(
            wait_until("container 2 CLOSED on the members holding it", || {
                let mut cl = cl.clone();
                async move {
                    cl.container(2)
                        .await
                        .ok()
                        .filter(|d| d.state == ContainerState::Closed as i32)
                }
            })
            .await,
        );
    }
    assert_eq!(closed[0].block_count, 2);
    assert_eq!(
        (closed[0].bcsid, closed[0].content_digest),
        (closed[1].bcsid, closed[1].content_digest)
    );
    for (dn, id) in ids {
        let st = c.scm.wait_status(id).await;
        assert_eq!(
            st.status,
            spb::command_status::Status::Executed as i32,
            "close on datanode {dn}: {st:?}"
        );
    }
    // Both copies report CLOSED at the full BCSID (the SCM's CLOSING → CLOSED rule); the
    // victim holds and reports nothing for container 2.
    for i in [leader, other] {
        let (scm, dn, bcsid) = (c.scm.clone(), c.nodes[i].id, closed[0].bcsid);
        wait_until("CLOSED replica reported", || {
            let scm = scm.clone();
            async move {
                scm.replica(dn, 2).filter(|r| {
                    r.state == spb::ReplicaState::ReplicaClosed as i32 && r.bcsid == bcsid
                })
            }
        })
        .await;
    }
    assert!(c.nodes[victim].dn().store.descriptor(2).is_none());
    assert!(c.scm.replica(victim_id, 2).is_none());

    // The pipeline is healthy on every member and commits a new container through the victim.
    for n in &c.nodes {
        let p = n.dn().pipelines.get(1).unwrap();
        assert!(p.state.is_healthy(), "{:?}", p.state.unhealthy_reason());
    }
    let mut v = c.client(victim);
    v.write_block(1, 3, 1, &bytes(31, 3000), 4096)
        .await
        .unwrap();
    for i in [leader, other] {
        c.wait_caught_up(1, victim, i).await;
        let d = c.client(i).container(3).await.unwrap();
        assert_eq!((d.state, d.block_count), (ContainerState::Open as i32, 1));
    }
}
