//! Snapshot installs that take long (issue 12, item 4): the leader's limit is on progress,
//! not on the whole transfer, and a withdrawn install leaves nothing staged behind.
//!
//! The transfer is slowed by the failpoint `raft-snapshot-send-pace` (a pause after each
//! 1 MiB chunk sent). Limits are scaled down from the defaults (a 3 s stall limit instead
//! of 30 s) so the tests take seconds; what they check does not depend on the scale.
//!
//! Failpoints are process-global: each test holds a `FailScenario`, which serialises them.

use std::sync::Arc;
use std::time::Duration;

use rozone_raft::RaftGroup;
use rozone_tests::{init_tracing, put, Cluster, KvLogic, WAIT};

/// About 12 MiB of values that do not compress, so the checkpoint has a dozen chunks.
async fn fill(c: &Cluster) {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in 0..96 {
        let v: String = (0..128 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'!' + (x % 94) as u8)
            })
            .collect();
        put(c, &format!("big{i:03}"), &v).await.unwrap();
    }
}

/// A cluster of three with a 3 s install stall limit, ~12 MiB of state, a snapshot and a
/// log purged past it: a fourth member can only catch up by installing the snapshot.
async fn cluster_needing_a_snapshot() -> (Cluster, Arc<RaftGroup<KvLogic>>) {
    let c = Cluster::start(
        3,
        Arc::new(|cfg| {
            cfg.snapshot_logs_since_last = 0;
            cfg.max_in_snapshot_log_to_keep = 0;
            cfg.install_snapshot_timeout = Duration::from_secs(3);
        }),
    )
    .await
    .unwrap();
    fill(&c).await;
    let leader = c.leader().await.unwrap().clone();
    c.snapshot_and_purge(&leader).await.unwrap();
    (c, leader)
}

/// The member's snapshot counters once it counted an install: the counter moves when the
/// install call returns, a moment after the applied index that `wait_converged` watches.
async fn installed(g: &RaftGroup<KvLogic>) -> rozone_raft::SnapshotStats {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let stats = g.snapshot_stats();
        if stats.installs > 0 || tokio::time::Instant::now() >= deadline {
            return stats;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Staging directories left in member `id`'s state directory.
fn staged(c: &Cluster, id: u64) -> Vec<String> {
    let sm = c.root.path().join(format!("n{id}")).join("sm");
    std::fs::read_dir(sm)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("staging-"))
                .collect()
        })
        .unwrap_or_default()
}

/// A transfer that takes about four times the stall limit (1 s per chunk, a dozen chunks,
/// 3 s limit) installs on the first offer, because bytes keep arriving.
///
/// Fails on 15e8a35 (run there once with only the pacing failpoint added): the leader's
/// deadline was the limit on the whole install, cut every attempt at 3 s, and the new
/// member never caught up (`wait_converged` timed out).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transfer_longer_than_the_stall_limit_installs_while_it_progresses() {
    init_tracing();
    let scenario = fail::FailScenario::setup();
    let (mut c, leader) = cluster_needing_a_snapshot().await;
    fail::cfg("raft-snapshot-send-pace", "return(1000)").unwrap();
    c.start_member(4).await.unwrap();
    leader.add_learner(4, c.info(4), false).await.unwrap();
    c.wait_converged().await.unwrap();
    let stats = installed(&c.member(4).unwrap().group).await;
    assert_eq!(stats.installs, 1, "{stats:?}");
    assert_eq!(stats.download_failures, 0, "{stats:?}");
    assert!(staged(&c, 4).is_empty(), "{:?}", staged(&c, 4));
    fail::remove("raft-snapshot-send-pace");
    drop(leader);
    c.stop_all().await.unwrap();
    scenario.teardown();
}

/// A transfer that stalls longer than the limit (5 s between chunks) is given up by the
/// leader; the follower stops downloading and removes what it staged. The leader then
/// moves on to a newer snapshot, which installs once the link is fast again, and nothing
/// staged is left behind.
///
/// Fails on 15e8a35 (run there once with only the pacing failpoint added, waiting 8 s
/// instead of for the `withdrawn` count): the abandoned download's `staging-<id>-1`
/// directory stayed after the newer snapshot installed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_withdrawn_install_leaves_nothing_staged_and_a_later_offer_installs() {
    init_tracing();
    let scenario = fail::FailScenario::setup();
    let (mut c, leader) = cluster_needing_a_snapshot().await;
    fail::cfg("raft-snapshot-send-pace", "return(5000)").unwrap();
    c.start_member(4).await.unwrap();
    leader.add_learner(4, c.info(4), false).await.unwrap();
    // Wait until the leader gave up on at least one offer (the follower saw its download
    // withdrawn), then until nothing is staged any more.
    let g4 = c.member(4).unwrap().group.clone();
    let deadline = tokio::time::Instant::now() + WAIT;
    while g4.snapshot_stats().withdrawn == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no offer was withdrawn"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The next offer is of a newer snapshot (another id, so another staging name): what
    // the withdrawn download staged must not be left behind.
    put(&c, "after", "withdrawal").await.unwrap();
    leader.wait_log_applied(WAIT).await.unwrap();
    let upto = leader.snapshot_now(WAIT).await.unwrap();
    leader.purge_log(upto).await.unwrap();
    fail::remove("raft-snapshot-send-pace");
    c.wait_converged().await.unwrap();
    assert!(staged(&c, 4).is_empty(), "{:?}", staged(&c, 4));
    let stats = installed(&g4).await;
    assert!(stats.installs >= 1, "{stats:?}");
    drop((leader, g4));
    c.stop_all().await.unwrap();
    scenario.teardown();
}
