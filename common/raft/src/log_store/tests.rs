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

fn blanks(from: u64, to: u64) -> Vec<Entry> {
    use openraft::entry::RaftEntry;
    (from..=to)
        .map(|i| Entry::new_blank(crate::types::log_id(1, 1, i)))
        .collect()
}

fn indexes(v: &[Entry]) -> Vec<u64> {
    v.iter().map(openraft::entry::RaftEntry::index).collect()
}

/// `v` is exactly the entries `from..=to`, in order.
fn assert_run(v: &[Entry], from: u64, to: u64) {
    let got = indexes(v);
    let ok = got.len() as u64 == to + 1 - from && got.iter().zip(from..).all(|(a, b)| *a == b);
    assert!(
        ok,
        "want {from}..={to}, got {} entries: {:?}..{:?}",
        got.len(),
        got.first(),
        got.last()
    );
}

/// Appends `entries` and waits until the writer has synced them.
async fn append_synced(s: &mut RocksLogStore, entries: Vec<Entry>) {
    use openraft::type_config::TypeConfigExt;
    let (tx, rx) = TypeConfig::oneshot();
    s.append(entries, Callback::signal(tx)).await.unwrap();
    rx.await.unwrap().unwrap();
}

/// More entries than the in-memory tail keeps: reads that span the database and the tail
/// return every entry once, in order, before and after a reopen; truncation and purge are
/// seen by both parts.
#[tokio::test]
async fn reads_span_the_tail_and_the_database_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let n = 3000;
    {
        let mut s = RocksLogStore::open(dir.path(), true).unwrap();
        for chunk in (1..=n).step_by(100) {
            append_synced(&mut s, blanks(chunk, chunk + 99)).await;
        }
        assert_run(&s.try_get_log_entries(..).await.unwrap(), 1, n);
        s.truncate_after(Some(crate::types::log_id(1, 1, 2500)))
            .await
            .unwrap();
        s.purge(crate::types::log_id(1, 1, 10)).await.unwrap();
        assert_run(&s.try_get_log_entries(5..=2600).await.unwrap(), 11, 2500);
        // Readable at once, before its write is synced.
        s.append(blanks(2501, 2501), Callback::noop())
            .await
            .unwrap();
        assert_eq!(
            indexes(&s.try_get_log_entries(2499..).await.unwrap()),
            vec![2499, 2500, 2501]
        );
    }
    let mut s = RocksLogStore::open(dir.path(), true).unwrap();
    let st = s.get_log_state().await.unwrap();
    assert_eq!(st.last_log_id.map(|l| l.index()), Some(2501));
    assert_eq!(st.last_purged_log_id.map(|l| l.index()), Some(10));
    assert_run(&s.try_get_log_entries(0..).await.unwrap(), 11, 2501);
}

/// A log write held by the disk (failpoint `raft-log-io`, a callback that blocks the calling
/// thread until released) must leave the caller's runtime free: on a current-thread runtime
/// (one worker for everything, as a busy multi-threaded one can be) another task still gets
/// to run while `save_vote` waits for the disk.
///
/// Fails on the code before `crate::blocking` (checked by making `blocking::run` call `f`
/// inline, as the store did), and again with the writer thread (checked on 2026-12-07 by
/// writing the vote inline in `save_vote` instead of through the writer): the write blocks
/// the only worker, the other task first runs once the disk released the write, and
/// `write.is_finished()` is then true.
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
