//! Three members over real gRPC on 127.0.0.1: elections, writes across a leader loss,
//! snapshot catch-up of a new learner, and a restart of the whole group from disk.

use std::collections::BTreeSet;
use std::sync::Arc;

use rozone_tests::{init_tracing, kv, put, Cluster, KvRequest};

fn default_tune() -> rozone_tests::Tune {
    Arc::new(|_| {})
}

/// Writes `n` keys with `concurrency` writers through whichever member leads; returns the
/// keys whose write was acknowledged.
async fn write_many(c: &Cluster, prefix: &str, n: usize, concurrency: usize) -> Vec<String> {
    let leader = c.leader().await.unwrap().clone();
    let mut tasks = Vec::new();
    for w in 0..concurrency {
        let leader = leader.clone();
        let prefix = prefix.to_string();
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for i in (w..n).step_by(concurrency) {
                let key = format!("{prefix}-{i:05}");
                let r = leader
                    .write(KvRequest::Put {
                        key: key.clone(),
                        value: format!("v{i}"),
                    })
                    .await;
                if r.is_ok() {
                    acked.push(key);
                }
            }
            acked
        }));
    }
    let mut acked = Vec::new();
    for t in tasks {
        acked.extend(t.await.unwrap());
    }
    acked
}

fn assert_all_present(c: &Cluster, keys: &[String]) {
    for (id, m) in &c.members {
        let db = m.group.db();
        for k in keys {
            assert!(
                kv::get(&db, k).unwrap().is_some(),
                "acknowledged key {k} missing on member {id}"
            );
        }
    }
}

fn assert_digests_equal(c: &Cluster) {
    let d = c.digests().unwrap();
    let distinct: BTreeSet<_> = d.values().collect();
    assert_eq!(distinct.len(), 1, "state digests differ: {d:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_members_commit_1000_writes_and_survive_leader_loss() {
    init_tracing();
    let mut c = Cluster::start(3, default_tune()).await.unwrap();
    let acked = write_many(&c, "k", 1000, 16).await;
    assert_eq!(
        acked.len(),
        1000,
        "every write to a stable leader is acknowledged"
    );

    let old = c.wait_ready_leader().await.unwrap();
    c.stop_member(old).await.unwrap();
    let new = c.wait_ready_leader().await.unwrap();
    assert_ne!(new, old, "a new leader is elected among the survivors");

    put(&c, "after-failover", "yes").await.unwrap();
    c.wait_converged().await.unwrap();
    assert_eq!(c.members.len(), 2);
    assert_all_present(&c, &acked);
    assert_digests_equal(&c);
    c.stop_all().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn new_learner_catches_up_from_checkpoint_after_logs_are_purged() {
    init_tracing();
    let mut c = Cluster::start(
        3,
        Arc::new(|cfg| {
            cfg.snapshot_logs_since_last = 0; // only when asked
            cfg.max_in_snapshot_log_to_keep = 0;
        }),
    )
    .await
    .unwrap();
    let acked = write_many(&c, "p", 300, 8).await;
    let leader_id = c.wait_ready_leader().await.unwrap();
    let leader = c.member(leader_id).unwrap().group.clone();
    c.snapshot_and_purge(&leader).await.unwrap();

    c.start_member(4).await.unwrap();
    let info = c.info(4);
    leader.add_learner(4, info, true).await.unwrap();
    c.wait_converged().await.unwrap();
    let learner = &c.member(4).unwrap().group;
    assert!(
        learner.snapshot_log_id().is_some(),
        "the learner can only have caught up through a snapshot"
    );
    assert_all_present(&c, &acked);
    assert_digests_equal(&c);

    // The learner keeps following by log afterwards.
    put(&c, "after-learner", "1").await.unwrap();
    c.wait_converged().await.unwrap();
    assert_digests_equal(&c);
    drop(leader);
    c.stop_all().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restarting_all_members_keeps_every_committed_write() {
    init_tracing();
    let mut c = Cluster::start(3, default_tune()).await.unwrap();
    let acked = write_many(&c, "r", 200, 8).await;
    assert_eq!(acked.len(), 200);
    c.wait_converged().await.unwrap();
    let before = c.digests().unwrap();

    c.stop_all().await.unwrap();
    for id in 1..=3 {
        c.start_member(id).await.unwrap();
    }
    c.wait_ready_leader().await.unwrap();
    c.wait_converged().await.unwrap();
    assert_all_present(&c, &acked);
    assert_eq!(
        c.digests().unwrap(),
        before,
        "state after restart equals state before"
    );
    put(&c, "after-restart", "1").await.unwrap();
    c.stop_all().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn membership_changes_and_leader_transfer() {
    init_tracing();
    let mut c = Cluster::start(3, default_tune()).await.unwrap();
    put(&c, "a", "1").await.unwrap();
    let leader_id = c.wait_ready_leader().await.unwrap();
    let leader = c.member(leader_id).unwrap().group.clone();

    // Add a fourth member as learner, then promote it.
    c.start_member(4).await.unwrap();
    leader.add_learner(4, c.info(4), true).await.unwrap();
    leader.promote(BTreeSet::from([4])).await.unwrap();
    let voters: BTreeSet<u64> = leader
        .metrics()
        .membership_config
        .membership()
        .voter_ids()
        .collect();
    assert_eq!(voters, BTreeSet::from([1, 2, 3, 4]));
    // Membership carries every member's address.
    let m = leader.metrics();
    for id in 1..=4 {
        let node = m.membership_config.membership().get_node(&id).cloned();
        assert_eq!(
            node,
            Some(c.info(id)),
            "address of member {id} in membership"
        );
    }

    // Hand leadership to member 4.
    leader.transfer_leader(4).await.unwrap();
    let g4 = c.member(4).unwrap().group.clone();
    g4.wait_for(rozone_tests::WAIT, "4 leads", |m| {
        rozone_raft::leader_ready(m)
    })
    .await
    .unwrap();

    // Remove the old leader.
    g4.remove_members(BTreeSet::from([leader_id]))
        .await
        .unwrap();
    let voters: BTreeSet<u64> = g4
        .metrics()
        .membership_config
        .membership()
        .voter_ids()
        .collect();
    assert!(!voters.contains(&leader_id));
    drop(leader);
    c.stop_member(leader_id).await.unwrap();
    put(&c, "b", "2").await.unwrap();
    c.wait_converged().await.unwrap();
    assert_digests_equal(&c);
    drop(g4);
    c.stop_all().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn follower_records_leader_contact_and_refuses_writes_with_hint() {
    init_tracing();
    let mut c = Cluster::start(3, default_tune()).await.unwrap();
    put(&c, "a", "1").await.unwrap();
    let leader_id = c.wait_ready_leader().await.unwrap();
    c.wait_converged().await.unwrap();
    let follower = c.members.values().find(|m| m.id != leader_id).unwrap();
    // Heartbeats arrive every 100ms: wait for one that carries a commit of this term and
    // the echo of the follower's clock (the leader holds its lease).
    let deadline = tokio::time::Instant::now() + rozone_tests::WAIT;
    let rec = loop {
        if let Some(r) = follower.group.leader_contact() {
            if r.commit_in_leader_term() && r.sent_after.is_some() {
                break r;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no leader contact recorded"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(rec.leader, leader_id);
    // The proven send time is before the arrival, by at most a heartbeat and a round trip.
    assert!(rec.sent_after.unwrap() <= rec.at);
    assert_eq!(
        rec.term,
        c.member(leader_id).unwrap().group.metrics().current_term
    );
    let err = follower
        .group
        .write(KvRequest::Delete { key: "a".into() })
        .await
        .unwrap_err();
    match err {
        rozone_raft::RaftGroupError::NotLeader {
            leader: Some((id, info)),
        } => {
            assert_eq!(id, leader_id);
            assert_eq!(info, c.info(leader_id));
        }
        other => panic!("expected NotLeader with a hint, got {other}"),
    }
    c.stop_all().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unreachable_peer_is_retried_with_backoff_not_in_a_loop() {
    init_tracing();
    let mut c = Cluster::start(3, default_tune()).await.unwrap();
    put(&c, "a", "1").await.unwrap();
    let leader_id = c.wait_ready_leader().await.unwrap();
    let dead = if leader_id == 3 { 2 } else { 3 };
    c.stop_member(dead).await.unwrap();
    put(&c, "b", "2").await.unwrap(); // gives replication something to send to the dead peer
    let leader = c.member(leader_id).unwrap().group.clone();
    let start = leader.rpc_counts(dead);
    // Heartbeats (every 100 ms) are the clock: wait for 20 more of them.
    let deadline = tokio::time::Instant::now() + rozone_tests::WAIT;
    while leader.rpc_counts(dead).heartbeat < start.heartbeat + 20 {
        assert!(tokio::time::Instant::now() < deadline, "heartbeats stopped");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let replication = leader.rpc_counts(dead).replication - start.replication;
    // Backoff is 200 ms: about 10 attempts in 20 heartbeat intervals. A retry loop without
    // backoff makes thousands.
    assert!(
        replication <= 40,
        "{replication} replication attempts to a dead peer in 20 heartbeat intervals"
    );
    drop(leader);
    c.stop_all().await.unwrap();
}
