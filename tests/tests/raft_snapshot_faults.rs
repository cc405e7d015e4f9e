//! Snapshot transfer under injected faults (failpoints): a transfer cut midway is retried,
//! a checkpoint that fails verification never touches the live state, and the node keeps
//! accepting appends.
//!
//! Failpoints are process-global: each test holds a `FailScenario`, which serialises them.

use std::sync::Arc;

use rozone_raft::RaftGroup;
use rozone_tests::{init_tracing, kv, put, Cluster, KvLogic, WAIT};

/// A cluster of three whose leader has a snapshot and a log purged past it, so any member
/// that needs earlier entries must install the snapshot.
async fn cluster_with_purged_leader(keys: usize) -> (Cluster, Arc<RaftGroup<KvLogic>>) {
    let c = Cluster::start(
        3,
        Arc::new(|cfg| {
            cfg.snapshot_logs_since_last = 0;
            cfg.max_in_snapshot_log_to_keep = 0;
            cfg.download.attempts = 3;
        }),
    )
    .await
    .unwrap();
    for i in 0..keys {
        put(&c, &format!("k{i:04}"), "v").await.unwrap();
    }
    let leader = c.leader().await.unwrap().clone();
    c.snapshot_and_purge(&leader).await.unwrap();
    (c, leader)
}

fn digests_equal(c: &Cluster) -> bool {
    let d = c.digests().unwrap();
    d.values().all(|v| Some(v) == d.values().next())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn snapshot_transfer_cut_midway_is_retried_and_follower_ends_equal() {
    init_tracing();
    let scenario = fail::FailScenario::setup();
    let (mut c, leader) = cluster_with_purged_leader(200).await;
    // The first download is cut after its first chunk; later ones go through.
    fail::cfg("raft-snapshot-transfer", "1*return->off").unwrap();
    c.start_member(4).await.unwrap();
    leader.add_learner(4, c.info(4), true).await.unwrap();
    c.wait_converged().await.unwrap();
    let g4 = &c.member(4).unwrap().group;
    let stats = g4.snapshot_stats();
    assert!(
        stats.download_failures >= 1,
        "the cut transfer was seen: {stats:?}"
    );
    assert!(stats.installs >= 1, "then a retry installed it: {stats:?}");
    assert!(digests_equal(&c));
    drop(leader);
    c.stop_all().await.unwrap();
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_verification_keeps_old_state_and_node_still_accepts_appends() {
    init_tracing();
    let scenario = fail::FailScenario::setup();
    let mut c = Cluster::start(
        3,
        Arc::new(|cfg| {
            cfg.snapshot_logs_since_last = 0;
            cfg.max_in_snapshot_log_to_keep = 0;
            cfg.download.attempts = 2;
        }),
    )
    .await
    .unwrap();
    for i in 0..50 {
        put(&c, &format!("old{i}"), "v").await.unwrap();
    }
    c.wait_converged().await.unwrap();
    // Member 3 falls behind (it is stopped) while the others move on and purge their logs.
    let leader_id = c.wait_ready_leader().await.unwrap();
    let lagging = if leader_id == 3 { 2 } else { 3 };
    let lagging_digest = kv::digest(&c.member(lagging).unwrap().group.db()).unwrap();
    c.stop_member(lagging).await.unwrap();
    for i in 0..100 {
        put(&c, &format!("new{i}"), "v").await.unwrap();
    }
    let leader = c.leader().await.unwrap().clone();
    c.snapshot_and_purge(&leader).await.unwrap();
    drop(leader);

    fail::cfg("raft-snapshot-verify", "return").unwrap();
    c.start_member(lagging).await.unwrap();
    let g = c.member(lagging).unwrap().group.clone();
    // Wait for several failed verifications (each offer tries `attempts` times).
    let deadline = tokio::time::Instant::now() + WAIT;
    while g.snapshot_stats().download_failures < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no verification attempt seen"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(g.snapshot_stats().installs, 0);
    assert_eq!(
        kv::digest(&g.db()).unwrap(),
        lagging_digest,
        "the live state is untouched by a checkpoint that failed verification"
    );
    assert!(kv::get(&g.db(), "old1").unwrap().is_some());

    // Once verification passes the leader's next offer installs, and appends follow.
    fail::cfg("raft-snapshot-verify", "off").unwrap();
    c.wait_converged().await.unwrap();
    put(&c, "after", "1").await.unwrap();
    c.wait_converged().await.unwrap();
    assert!(kv::get(&g.db(), "after").unwrap().is_some());
    assert!(digests_equal(&c));
    drop(g);
    c.stop_all().await.unwrap();
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_checkpoint_build_is_not_fatal() {
    init_tracing();
    let scenario = fail::FailScenario::setup();
    let mut c = Cluster::start(3, Arc::new(|cfg| cfg.snapshot_logs_since_last = 0))
        .await
        .unwrap();
    put(&c, "a", "1").await.unwrap();
    let leader = c.leader().await.unwrap().clone();
    fail::cfg("raft-checkpoint-build", "1*return->off").unwrap();
    leader.trigger_snapshot().await.unwrap();
    // The refused build leaves the node running; the next trigger builds.
    put(&c, "b", "2").await.unwrap();
    leader.snapshot_now(WAIT).await.unwrap();
    put(&c, "c", "3").await.unwrap();
    c.wait_converged().await.unwrap();
    drop(leader);
    c.stop_all().await.unwrap();
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_install_step_is_retried() {
    init_tracing();
    let scenario = fail::FailScenario::setup();
    let (mut c, leader) = cluster_with_purged_leader(50).await;
    fail::cfg("raft-snapshot-install", "1*return->off").unwrap();
    c.start_member(4).await.unwrap();
    leader.add_learner(4, c.info(4), true).await.unwrap();
    c.wait_converged().await.unwrap();
    assert!(digests_equal(&c));
    drop(leader);
    c.stop_all().await.unwrap();
    scenario.teardown();
}

/// The leader's database holds a row its log does not explain (written directly, as a seeded
/// or upgraded cluster would have). A joining member whose first checkpoint download is cut
/// retries, takes the leader's checkpoint, and so holds that row; joining by replaying the
/// log (Ozone's HDDS-16899) would lose it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn join_by_checkpoint_retries_and_carries_rows_the_log_does_not_explain() {
    init_tracing();
    let scenario = fail::FailScenario::setup();
    let mut c = Cluster::start(3, Arc::new(|cfg| cfg.snapshot_logs_since_last = 0))
        .await
        .unwrap();
    for i in 0..20 {
        put(&c, &format!("k{i}"), "v").await.unwrap();
    }
    let leader_id = c.wait_ready_leader().await.unwrap();
    let leader = c.member(leader_id).unwrap().group.clone();
    let db = leader.db();
    db.put_cf(
        rozone_kv::cf(&db, kv::CF_KV).unwrap(),
        "seeded",
        "not-in-log",
    )
    .unwrap();
    drop(db);
    leader.snapshot_now(WAIT).await.unwrap();
    assert!(
        leader.metrics().purged.is_none(),
        "the leader's log still starts at 1"
    );

    fail::cfg("raft-snapshot-transfer", "1*return->off").unwrap();
    let policy = rozone_raft::DownloadPolicy {
        attempts: 3,
        pause: std::time::Duration::from_millis(100),
        ..Default::default()
    };
    c.bootstrap_member(4, leader_id, &policy).await.unwrap();
    c.start_member(4).await.unwrap();
    leader.add_learner(4, c.info(4), true).await.unwrap();
    c.wait_converged().await.unwrap();
    let g4 = &c.member(4).unwrap().group;
    assert_eq!(
        kv::get(&g4.db(), "seeded").unwrap().as_deref(),
        Some("not-in-log"),
        "the joined member holds the row only the leader's checkpoint carries"
    );
    assert_eq!(
        kv::digest(&g4.db()).unwrap(),
        kv::digest(&leader.db()).unwrap()
    );
    drop(leader);
    c.stop_all().await.unwrap();
    scenario.teardown();
}

/// A checkpoint that can never be downloaded ends the join with an error naming the failed
/// download and the leader's address, and the group's membership is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn join_by_checkpoint_gives_up_with_a_clear_error_and_changes_nothing() {
    init_tracing();
    let scenario = fail::FailScenario::setup();
    let mut c = Cluster::start(3, Arc::new(|cfg| cfg.snapshot_logs_since_last = 0))
        .await
        .unwrap();
    put(&c, "a", "1").await.unwrap();
    let leader_id = c.wait_ready_leader().await.unwrap();
    let leader = c.member(leader_id).unwrap().group.clone();
    leader.snapshot_now(WAIT).await.unwrap();
    let before = leader.metrics().membership_config.clone();

    fail::cfg("raft-snapshot-transfer", "return").unwrap();
    let policy = rozone_raft::DownloadPolicy {
        attempts: 3,
        pause: std::time::Duration::from_millis(50),
        ..Default::default()
    };
    let err = c.bootstrap_member(4, leader_id, &policy).await.unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("checkpoint download"), "{msg}");
    assert!(msg.contains(&c.info(leader_id).peer_addr), "{msg}");
    assert!(msg.contains("3 attempt"), "{msg}");
    for m in c.members.values() {
        assert_eq!(m.group.metrics().membership_config, before);
    }
    drop(leader);
    c.stop_all().await.unwrap();
    scenario.teardown();
}
