//! Tests of the log store: what it persists, and that its disk I/O never holds the async
//! worker the caller runs on.

use openraft::storage::RaftLogStorage;
use openraft::RaftLogReader;

use super::*;

#[tokio::test]
async fn vote_committed_and_truncate_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = RocksLogStore::open(dir.path(), false).unwrap();
    assert_eq!(s.read_vote().await.unwrap(), None);
    s.save_vote(&Vote::new(3, 1)).await.unwrap();
    s.save_committed(Some(crate::types::log_id(3, 1, 7)))
        .await
        .unwrap();
    assert_eq!(s.read_vote().await.unwrap(), Some(Vote::new(3, 1)));
    assert_eq!(
        s.read_committed().await.unwrap(),
        Some(crate::types::log_id(3, 1, 7))
    );
    let st = s.get_log_state().await.unwrap();
    assert_eq!(st.last_log_id, None);
    s.truncate_after(None).await.unwrap();
    assert!(s.try_get_log_entries(0..10).await.unwrap().is_empty());
}

/// A log write held by the disk (failpoint `raft-log-io`, a callback that blocks the calling
/// thread until released) must leave the caller's runtime free: on a current-thread runtime
/// (one worker for everything, as a busy multi-threaded one can be) another task still gets
/// to run while `save_vote` waits for the disk.
///
/// Fails on the code before `crate::blocking` (checked by making `blocking::run` call `f`
/// inline, as the store did): the write blocks the only worker, the other task first runs
/// once the disk released the write, and `write.is_finished()` is then true.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn a_held_log_write_does_not_stall_other_tasks_on_the_runtime() {
    use std::sync::{mpsc, Arc, Mutex};
    use std::time::Duration;

    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let mut s = RocksLogStore::open(dir.path(), true).unwrap();

    // The disk: signals that a write reached it, then holds it until released (or, so an
    // old build fails instead of hanging, for at most 10 s).
    let entered = Arc::new(tokio::sync::Notify::new());
    let (release, held) = mpsc::channel::<()>();
    let held = Mutex::new(held);
    let signal = entered.clone();
    fail::cfg_callback("raft-log-io", move || {
        signal.notify_one();
        let _ = held.lock().unwrap().recv_timeout(Duration::from_secs(10));
    })
    .unwrap();

    let write = tokio::spawn(async move {
        s.save_vote(&Vote::new(4, 2)).await?;
        Ok::<_, io::Error>(s)
    });
    // This task makes progress while the write is held: it is woken by the disk's signal
    // and runs a timer (heartbeats are timers) on the same runtime.
    tokio::time::timeout(Duration::from_secs(30), entered.notified())
        .await
        .expect("the write never reached the disk");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        !write.is_finished(),
        "the other task only ran after the held write finished: the write blocked the worker"
    );

    fail::remove("raft-log-io");
    release.send(()).unwrap();
    let mut s = write.await.unwrap().unwrap();
    assert_eq!(s.read_vote().await.unwrap(), Some(Vote::new(4, 2)));
    scenario.teardown();
}
