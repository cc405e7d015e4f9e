//! A fatal error in the OM's Raft group (a state-machine storage error stops openraft's
//! core for good) ends `rozone_om::run` with a clear error, so the process exits and its
//! supervisor restarts it. Before (commit cd62657) `run` kept waiting for a shutdown that
//! never came: the process stayed up serving nothing; this test timed out there.

mod common;

use std::time::Duration;

use rozone_om::config::Startup;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fatal_storage_error_ends_the_process_with_a_clear_error() {
    let scenario = fail::FailScenario::setup();
    let (_scm, scm_addr) = common::fake_scm().await;
    let dir = tempfile::tempdir().unwrap();
    let peers = common::peers(1);
    let mut cfg = common::config(dir.path(), 1, &peers, scm_addr);
    cfg.startup = Startup {
        init: true,
        ..Default::default()
    };
    let stop = CancellationToken::new();
    let run = tokio::spawn(rozone_om::run(cfg, stop.clone()));
    let c = common::ring_client(&[peers[0].client_addr.clone()]);
    c.create_volume("before", "alice", None)
        .await
        .expect("the OM serves");

    // The next apply fails as a disk error would: openraft stops its core.
    fail::cfg("raft-apply", "return").unwrap();
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        c.create_volume("after", "alice", None),
    )
    .await;
    let ended = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("run() must end after a fatal Raft error, not keep the process up")
        .expect("run() does not panic");
    let e = format!("{:#}", ended.expect_err("a fatal error is an error exit"));
    assert!(e.contains("Raft group stopped on a fatal error"), "{e}");
    assert!(!stop.is_cancelled());
    scenario.teardown();
}
