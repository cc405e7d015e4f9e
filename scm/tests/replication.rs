//! The ReplicationManager through reports against a running SCM (Ozone's HDDS-17435 seen
//! from the SCM): a CLOSED container with three real replicas and one empty replica
//! (BCSID 0, no blocks) deletes the empty one and never a real one; with two real replicas
//! left it asks for a third copy on a datanode without a replica, from the real sources.
//! A short replica (the full BCSID, fewer blocks) is not counted and is never a source.

mod common;

use std::collections::BTreeSet;

use common::*;
use rozone_proto::scm as pb;
use rozone_proto::scm::scm_command::Command;
use rozone_proto::scm::ReplicaState as R;

/// Five registered fake datanodes, and a container opened by one block on a pipeline of
/// three of them and then asked to close: (container, its pipeline's members, the others).
async fn closing_container(c: &mut Clients, dns: &mut [FakeDn]) -> (u64, Vec<u64>, Vec<u64>) {
    for d in dns.iter_mut() {
        d.register(vec![]).await;
    }
    // One block opens a container on the pipeline of three of the five.
    let b = eventually!("a block", {
        c.block
            .allocate_block(pb::AllocateBlockRequest {
                count: 1,
                owner: "om1".into(),
                ..Default::default()
            })
            .await
            .ok()
    })
    .into_inner()
    .blocks
    .remove(0);
    let cid = b.block_id.unwrap().container_id;
    let members: Vec<u64> = b.pipeline.unwrap().members.iter().map(|m| m.id).collect();
    let others: Vec<u64> = (1..=5).filter(|i| !members.contains(i)).collect();
    let closing = c
        .admin
        .close_container(pb::CloseContainerRequest { container_id: cid })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(closing.state, pb::ContainerState::ContainerClosing as i32);
    (cid, members, others)
}

/// The first replicate command any datanode receives for `cid`: (target, sources).
async fn first_replicate(dns: &mut [FakeDn], cid: u64) -> (u64, BTreeSet<u64>) {
    let (target, cmd) = eventually!("a replicate command", {
        let mut found = None;
        for d in dns.iter_mut() {
            d.beat().await;
            let got =
                d.got(|x| matches!(x, Command::ReplicateContainer(r) if r.container_id == cid));
            if let Some(cmd) = got.first() {
                found = Some((d.id, cmd.clone()));
            }
        }
        found
    });
    let Some(Command::ReplicateContainer(r)) = cmd.command else {
        unreachable!()
    };
    (target, r.sources.iter().map(|s| s.id).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn empty_replica_is_deleted_never_a_real_one_and_a_lost_copy_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let scm = start_scm(dir.path(), |c| c.scm.max_pipelines_per_datanode = 1).await;
    let mut c = clients(&scm).await;
    let mut dns: Vec<FakeDn> = (1..=5).map(|i| FakeDn::new(i, &c)).collect();
    let (cid, members, others) = closing_container(&mut c, &mut dns).await;
    let (empty_dn, spare_dn) = (others[0], others[1]);

    // The members report real CLOSED replicas (BCSID 12, 5 blocks): the container closes.
    for m in &members {
        let d = &mut dns[*m as usize - 1];
        d.beat_with(vec![replica(cid, R::ReplicaClosed, 12, 5)], vec![])
            .await;
    }
    let info = c
        .admin
        .container_info(pb::ContainerInfoRequest { container_id: cid })
        .await
        .unwrap()
        .into_inner();
    let rec = info.container.unwrap();
    assert_eq!(rec.state, pb::ContainerState::ContainerClosed as i32);
    assert_eq!(rec.bcsid, 12);
    assert_eq!(
        info.replication_health,
        pb::ReplicationHealth::ReplicationHealthy as i32
    );

    // An empty replica appears on a fourth datanode.
    dns[empty_dn as usize - 1]
        .beat_with(vec![replica(cid, R::ReplicaClosed, 0, 0)], vec![])
        .await;
    let info = c
        .admin
        .container_info(pb::ContainerInfoRequest { container_id: cid })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.replicas.len(), 4);
    assert_eq!(info.healthy_replicas, 3);
    for r in &info.replicas {
        assert_eq!(r.healthy, r.datanode_id != empty_dn, "{r:?}");
    }
    assert_eq!(
        info.replication_health,
        pb::ReplicationHealth::ReplicationOverReplicated as i32
    );

    let deletes_of =
        |d: &FakeDn| d.got(|x| matches!(x, Command::DeleteContainer(dc) if dc.container_id == cid));
    let del = eventually!("the empty replica's delete command", {
        for d in dns.iter_mut() {
            d.beat().await;
        }
        deletes_of(&dns[empty_dn as usize - 1]).first().cloned()
    });
    for m in &members {
        assert!(
            deletes_of(&dns[*m as usize - 1]).is_empty(),
            "a real replica on {m} was deleted"
        );
    }
    let st = c
        .admin
        .replication_manager_status(pb::ReplicationManagerStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(st.runs >= 1 && st.delete_commands_sent >= 1, "{st:?}");
    // The datanode deletes it and says so.
    let mut gone = replica(cid, R::ReplicaDeleted, 0, 0);
    gone.state = R::ReplicaDeleted as i32;
    dns[empty_dn as usize - 1]
        .beat_with(vec![gone.clone()], vec![executed(del.id)])
        .await;

    // A real replica is lost: two remain, so a third copy is asked for, on a datanode that
    // holds none, from the two real sources.
    let lost = members[2];
    dns[lost as usize - 1].beat_with(vec![gone], vec![]).await;
    let (target, sources) = first_replicate(&mut dns, cid).await;
    assert!(
        !members[..2].contains(&target),
        "target {target} already holds a copy"
    );
    assert!([empty_dn, spare_dn, lost].contains(&target));
    assert_eq!(sources, BTreeSet::from([members[0], members[1]]));
    let st = c
        .admin
        .replication_manager_status(pb::ReplicationManagerStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st.inflight_adds, 1, "{st:?}");
    assert_eq!(st.under_replicated_containers, vec![cid], "{st:?}");
    // No further delete was ever sent for this container, to anyone but the empty one.
    for d in &dns {
        if d.id != empty_dn {
            assert!(deletes_of(d).is_empty(), "datanode {} told to delete", d.id);
        }
    }
    scm.stop().await;
}

/// A member that reports the container CLOSED at the full BCSID but with fewer blocks (it
/// caught up by snapshot and never received some blocks) is not a healthy copy: the admin
/// view says so, a new copy is made on a datanode without one, from the two full copies
/// only. Fails on commit cd62657 (three healthy copies, no replicate command).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn short_replica_at_the_full_bcsid_is_unhealthy_and_never_a_source() {
    let dir = tempfile::tempdir().unwrap();
    let scm = start_scm(dir.path(), |c| c.scm.max_pipelines_per_datanode = 1).await;
    let mut c = clients(&scm).await;
    let mut dns: Vec<FakeDn> = (1..=5).map(|i| FakeDn::new(i, &c)).collect();
    let (cid, members, others) = closing_container(&mut c, &mut dns).await;
    let short = members[1];
    for m in &members {
        let blocks = if *m == short { 3 } else { 5 };
        dns[*m as usize - 1]
            .beat_with(vec![replica(cid, R::ReplicaClosed, 12, blocks)], vec![])
            .await;
    }
    let info = c
        .admin
        .container_info(pb::ContainerInfoRequest { container_id: cid })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        info.container.as_ref().unwrap().state,
        pb::ContainerState::ContainerClosed as i32
    );
    assert_eq!(info.healthy_replicas, 2, "{info:?}");
    for r in &info.replicas {
        assert_eq!(r.healthy, r.datanode_id != short, "{r:?}");
    }
    assert_eq!(
        info.replication_health,
        pb::ReplicationHealth::ReplicationUnderReplicated as i32
    );
    let (target, sources) = first_replicate(&mut dns, cid).await;
    assert!(
        others.contains(&target),
        "target {target} already holds a replica"
    );
    let full: BTreeSet<u64> = members.iter().copied().filter(|m| *m != short).collect();
    assert_eq!(sources, full, "the short replica must never be a source");
    scm.stop().await;
}
