//! RocksDB log store: its own database (never inside a state-machine checkpoint), big-endian
//! index keys, vote / committed / purged in a meta column family.
//!
//! Appends are group-committed: `append` writes the batch (so the entries are readable at
//! once, as openraft requires) and hands the flush callback to one flusher thread, which
//! syncs the WAL once for every callback that queued up meanwhile. Under load many appends
//! share one fsync, which is what lets a disk with a few hundred fsyncs/s commit tens of
//! thousands of entries per second.
//!
//! Every RocksDB call (reads included) runs on tokio's blocking pool ([`crate::blocking`]):
//! a slow or hung disk then holds the task that waits for it, never the async workers that
//! run heartbeats and elections. The `raft-log-io` failpoint sits in each such call (a test
//! configures `pause`, `sleep(ms)` or a callback there to stand for a slow disk).

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;

use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader};
use rozone_kv::rocksdb::{Direction, IteratorMode, WriteBatch, WriteOptions, DB};
use rozone_kv::{cf, key_u64, u64_key, DbTuning};

use crate::hook::AppendHook;
use crate::record;
use crate::types::{Entry, LogId, TypeConfig, Vote};

const CF_LOGS: &str = "logs";
const CF_META: &str = "meta";
const KEY_VOTE: &[u8] = b"vote";
const KEY_COMMITTED: &[u8] = b"committed";
const KEY_PURGED: &[u8] = b"last_purged";

type Callback = IOFlushed<TypeConfig>;

/// The log store of one Raft group.
#[derive(Clone)]
pub struct RocksLogStore {
    db: Arc<DB>,
    /// Sync appends (fsync the WAL) before acknowledging them. Off only for tests/benchmarks
    /// that measure the CPU path.
    fsync: bool,
    flusher: Arc<Flusher>,
    /// Runs before each append (see [`AppendHook`]).
    hook: Option<Arc<dyn AppendHook>>,
}

/// The flusher thread; joined when the last clone of the store is dropped, so the database
/// is closed before its owner returns (RocksDB aborts if a DB outlives process exit).
struct Flusher {
    tx: Option<std_mpsc::Sender<Callback>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Flusher {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl RocksLogStore {
    /// Opens (or creates) the log database at `path`.
    pub fn open(path: &Path, fsync: bool) -> io::Result<Self> {
        std::fs::create_dir_all(path)?;
        let db = rozone_kv::open(path, &[CF_LOGS, CF_META], &DbTuning::default())?;
        let (tx, rx) = std_mpsc::channel::<Callback>();
        let flush_db = db.clone();
        let thread = std::thread::Builder::new()
            .name("raft-log-flush".into())
            .spawn(move || flusher(flush_db, fsync, rx))?;
        Ok(Self {
            db,
            fsync,
            flusher: Arc::new(Flusher {
                tx: Some(tx),
                thread: Some(thread),
            }),
            hook: None,
        })
    }

    /// The stored vote, if one was ever stored. openraft stores its vote before it grants it
    /// to a candidate and before it acknowledges a leader's append, so a log without one
    /// belongs to a member that has made no promise to any leader.
    pub fn stored_vote(&self) -> io::Result<Option<Vote>> {
        self.get_meta(KEY_VOTE)?
            .map(|b| record::decode_vote(&b))
            .transpose()
    }

    /// Runs `hook` before every append from now on.
    pub fn with_append_hook(mut self, hook: Option<Arc<dyn AppendHook>>) -> Self {
        self.hook = hook;
        self
    }

    fn put_meta(&self, key: &[u8], bytes: Vec<u8>, sync: bool) -> io::Result<()> {
        let mut wo = WriteOptions::default();
        wo.set_sync(sync && self.fsync);
        self.db
            .put_cf_opt(cf(&self.db, CF_META)?, key, bytes, &wo)
            .map_err(io::Error::other)
    }

    fn get_meta(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        self.db
            .get_cf(cf(&self.db, CF_META)?, key)
            .map_err(io::Error::other)
    }

    /// A log id kept in the meta family (absent and "none" read the same).
    fn get_log_id(&self, key: &[u8]) -> io::Result<Option<LogId>> {
        Ok(match self.get_meta(key)? {
            Some(b) => record::decode_log_id(&b)?,
            None => None,
        })
    }

    /// Runs `f` against this store on the blocking pool, through the `raft-log-io`
    /// failpoint.
    async fn io<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Self) -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        let this = self.clone();
        crate::blocking::run(move || {
            fail::fail_point!("raft-log-io");
            f(&this)
        })
        .await
    }

    fn read_entries(&self, range: (Bound<u64>, Bound<u64>)) -> io::Result<Vec<Entry>> {
        let start = u64_key(start_key(&range));
        let mut out = Vec::new();
        let it = self.db.iterator_cf(
            cf(&self.db, CF_LOGS)?,
            IteratorMode::From(&start, Direction::Forward),
        );
        for item in it {
            let (k, v) = item.map_err(io::Error::other)?;
            let idx = key_u64(&k).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "log key is not 8 bytes")
            })?;
            if !range.contains(&idx) {
                break;
            }
            out.push(record::decode_entry(&v)?);
        }
        Ok(out)
    }

    fn log_state(&self) -> io::Result<LogState<TypeConfig>> {
        let last = self
            .db
            .iterator_cf(cf(&self.db, CF_LOGS)?, IteratorMode::End)
            .next();
        let last_log_id = match last {
            None => None,
            Some(item) => {
                let (_, v) = item.map_err(io::Error::other)?;
                Some(openraft::entry::RaftEntry::log_id(&record::decode_entry(
                    &v,
                )?))
            }
        };
        let last_purged_log_id = self.get_log_id(KEY_PURGED)?;
        Ok(LogState {
            last_log_id: last_log_id.or(last_purged_log_id),
            last_purged_log_id,
        })
    }

    fn write_entries(&self, entries: Vec<Entry>) -> io::Result<()> {
        let logs = cf(&self.db, CF_LOGS)?;
        let mut batch = WriteBatch::default();
        for entry in entries {
            let idx = openraft::entry::RaftEntry::index(&entry);
            batch.put_cf(logs, u64_key(idx), record::encode_entry(&entry)?);
        }
        self.db.write(batch).map_err(io::Error::other)
    }

    fn truncate_from(&self, from: u64) -> io::Result<()> {
        let mut wo = WriteOptions::default();
        // Truncated entries must not come back after a crash and be re-appended as if
        // they were the leader's.
        wo.set_sync(self.fsync);
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(cf(&self.db, CF_LOGS)?, u64_key(from), u64_key(u64::MAX));
        batch.delete_cf(cf(&self.db, CF_LOGS)?, u64_key(u64::MAX));
        self.db.write_opt(batch, &wo).map_err(io::Error::other)
    }

    fn purge_upto(&self, log_id: LogId) -> io::Result<()> {
        // Record the purge point first: entries at or below it are ignored even if the
        // range delete below is lost in a crash.
        self.put_meta(KEY_PURGED, record::encode_log_id(&Some(log_id))?, true)?;
        self.db
            .delete_range_cf(
                cf(&self.db, CF_LOGS)?,
                u64_key(0),
                u64_key(log_id.index() + 1),
            )
            .map_err(io::Error::other)
    }
}

/// Syncs the WAL once for every batch of callbacks waiting, then completes them all.
fn flusher(db: Arc<DB>, fsync: bool, rx: std_mpsc::Receiver<Callback>) {
    while let Ok(first) = rx.recv() {
        let mut waiting = vec![first];
        waiting.extend(rx.try_iter());
        let res = if fsync {
            db.flush_wal(true).map_err(io::Error::other)
        } else {
            Ok(())
        };
        for cb in waiting {
            let r = match &res {
                Ok(()) => Ok(()),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            };
            cb.io_completed(r);
        }
    }
}

fn start_key<RB: RangeBounds<u64>>(range: &RB) -> u64 {
    match range.start_bound() {
        Bound::Included(x) => *x,
        Bound::Excluded(x) => x.saturating_add(1),
        Bound::Unbounded => 0,
    }
}

impl RaftLogReader<TypeConfig> for RocksLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        // Owned bounds: the blocking closure must not borrow the caller's range.
        let range = (range.start_bound().cloned(), range.end_bound().cloned());
        self.io(move |s| s.read_entries(range)).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        self.io(|s| s.stored_vote()).await
    }
}

impl RaftLogStorage<TypeConfig> for RocksLogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, io::Error> {
        self.io(|s| s.log_state()).await
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        let bytes = record::encode_vote(vote)?;
        // A vote must be durable before it is acted on.
        self.io(move |s| s.put_meta(KEY_VOTE, bytes, true)).await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        let bytes = record::encode_log_id(&committed)?;
        // Lazily persisted: it only spares re-applying entries after a restart.
        self.io(move |s| s.put_meta(KEY_COMMITTED, bytes, false))
            .await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        self.io(|s| s.get_log_id(KEY_COMMITTED)).await
    }

    async fn append<I>(&mut self, entries: I, callback: Callback) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        if let Some(hook) = &self.hook {
            let normal: Vec<(u64, Vec<u8>)> = entries
                .iter()
                .filter_map(|e| match &e.payload {
                    openraft::EntryPayload::Normal(r) => {
                        Some((openraft::entry::RaftEntry::index(e), r.0.clone()))
                    }
                    _ => None,
                })
                .collect();
            if !normal.is_empty() {
                hook.before_append(&normal).await;
            }
        }
        self.io(move |s| s.write_entries(entries)).await?;
        // The write is in the WAL (readable now); the flusher syncs it and completes the
        // callback.
        self.flusher
            .tx
            .as_ref()
            .ok_or_else(|| io::Error::other("log flusher stopped"))?
            .send(callback)
            .map_err(|_| io::Error::other("log flusher thread stopped"))
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let from = last_log_id.map(|l| l.index() + 1).unwrap_or(0);
        self.io(move |s| s.truncate_from(from)).await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        self.io(move |s| s.purge_upto(log_id)).await
    }
}

#[cfg(test)]
mod tests;
