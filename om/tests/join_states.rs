//! Join states on real `rozone-om` processes (issue 12, items 2 and 3): a join that stopped
//! half-way never turns into a ring of its own, `--init` refuses a dir that began a join,
//! and a wiped member that comes back with `--bootstrap` is refused without harming the
//! ring, then joins again after `rozone admin om remove`.

mod procs;

use procs::ProcRing;
use rozone_proto::om as pb;
use rozone_proto::om::om_admin_client::OmAdminClient;

/// A LINEARIZABLE_ALLOW_FOLLOWER read of a volume on member `id` (read index from the
/// leader, then its own state).
async fn follower_read(ring: &ProcRing, id: u64, name: &str) -> Result<(), tonic::Status> {
    let mut c = ring.om(id).await.map_err(tonic::Status::unavailable)?;
    c.volume_info(pb::VolumeInfoRequest {
        name: name.into(),
        read: Some(pb::ReadOptions {
            consistency: pb::ReadConsistency::LinearizableAllowFollower as i32,
            ..Default::default()
        }),
    })
    .await
    .map(|_| ())
}

/// Waits until member `id` answers a consistent read of every volume in `names`.
async fn wait_reads(ring: &ProcRing, id: u64, names: &[String]) {
    let deadline = tokio::time::Instant::now() + procs::WAIT;
    for n in names {
        loop {
            match follower_read(ring, id, n).await {
                Ok(()) => break,
                Err(s) => assert!(
                    tokio::time::Instant::now() < deadline,
                    "OM {id} cannot read {n}: {s:?}"
                ),
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

/// Fails on cd62657 (run there once): the plain start after the killed join found openraft
/// uninitialised and initialised a one-member ring of its own ("OM serving") instead of
/// refusing; it was still running after 60 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_join_then_plain_start_refuses_and_bootstrap_resumes_it() {
    let mut ring = ProcRing::configure(2);
    ring.spawn(1, &["--init"]);
    ring.wait_serving(1);
    ring.wait_leader(&[1]).await;
    ring.create_volume(1, "before").await;
    // The leader cannot reach om2's peer port: the join stops once the learner is added.
    ring.members[&2].proxy.cut();
    ring.spawn(2, &["--bootstrap"]);
    ring.wait_members(1, "member 2", |m| m.iter().any(|m| m.id == 2))
        .await;
    ring.kill(2);

    ring.spawn(2, &[]);
    let err = ring.wait_exit(2);
    assert!(
        err.contains("started joining ring") && err.contains("--bootstrap to finish the join"),
        "plain start must refuse with the way out:\n{err}"
    );
    assert!(!err.contains("OM serving"), "{err}");
    ring.spawn(2, &["--init"]);
    let err = ring.wait_exit(2);
    assert!(err.contains("--init refused"), "{err}");
    assert!(!err.contains("OM serving"), "{err}");

    // The way out: --bootstrap again resumes the join (learner, caught up, voter).
    ring.members[&2].proxy.heal();
    ring.spawn(2, &["--bootstrap"]);
    ring.wait_serving(2);
    ring.wait_voters(2).await;
    assert_eq!(ring.wait_leader(&[1, 2]).await, 1);
    wait_reads(&ring, 2, &["before".to_string()]).await;
    let info = ring.ring_info(2).await.expect("om2 answers");
    assert_eq!(info.leader_id, Some(1), "om2 follows the ring: {info:?}");
    assert_eq!(info.ring_id, ring.ring_info(1).await.unwrap().ring_id);
}

/// Fails on cd62657 (run there once): the leader took the wiped OM back and panicked
/// ("follower log reversion is not allowed … matching: T1-N1.27; conflict: 27"): OM 1
/// exited, and the wiped OM got "transport error" instead of the refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wiped_member_rebootstrapped_is_refused_until_removed_and_loses_nothing() {
    let mut ring = ProcRing::start(3).await;
    let l = ring.wait_leader(&ring.ids()).await;
    let mut acked = Vec::new();
    for i in 0..20 {
        let name = format!("vol{i}");
        ring.create_volume(l, &name).await;
        acked.push(name);
    }
    let w = *ring.ids().iter().rev().find(|id| **id != l).unwrap();
    // om w catches up, then loses its data.
    wait_reads(&ring, w, &acked).await;
    ring.kill(w);
    std::fs::remove_dir_all(ring.data_dir(w)).expect("wipe");

    ring.spawn(w, &["--bootstrap"]);
    let err = ring.wait_exit(w);
    let want = format!(
        "member {w} is in the ring; remove it first (`rozone admin om remove {w}`) then bootstrap again"
    );
    assert!(err.contains(&want), "refusal must name the way out:\n{err}");
    assert!(!err.contains("OM serving"), "{err}");
    // No process of the ring exited, and every acknowledged write is still there.
    for id in ring.ids().into_iter().filter(|id| *id != w) {
        assert!(
            ring.running(id),
            "OM {id} exited:\n{}",
            ring.daemon(id).stderr()
        );
    }
    let l = ring.wait_leader(&ring.ids()).await;
    for name in &acked {
        ring.volume_info(l, name)
            .await
            .unwrap_or_else(|s| panic!("{name} lost: {s:?}"));
    }
    ring.create_volume(l, "after").await;
    acked.push("after".to_string());

    // The way out: remove it, bootstrap again: learner, caught up, voter.
    let ch = ring.channel(l).await.expect("leader");
    OmAdminClient::new(ch)
        .decommission(pb::DecommissionRequest { node_id: w })
        .await
        .expect("remove the wiped member");
    ring.wait_members(l, "member removed", |m| m.iter().all(|m| m.id != w))
        .await;
    ring.spawn(w, &["--bootstrap"]);
    ring.wait_serving(w);
    ring.wait_voters(3).await;
    wait_reads(&ring, w, &acked).await;
    for id in ring.ids() {
        assert!(
            ring.running(id),
            "OM {id} exited:\n{}",
            ring.daemon(id).stderr()
        );
    }
}
