//! RocksDB log store: its own database (never inside a state-machine checkpoint), big-endian
//! index keys, vote / committed / purged in a meta column family.
//!
//! An append returns once its entries are in the in-memory [`tail`] (readable from then on,
//! as openraft requires) and queued for the [`writer`] thread, which writes every append
//! queued meanwhile as one batch with one fsync (group commit) and then completes their
//! callbacks. Under load many appends share one fsync, which is what lets a disk with a few
//! hundred fsyncs/s commit tens of thousands of entries per second. The tail also answers
//! openraft's reads of new entries (replication, apply) without touching RocksDB.
//!
//! No RocksDB call runs on an async worker: writes run on the writer thread, reads that miss
//! the tail on tokio's blocking pool ([`crate::blocking`]). A slow or hung disk then holds
//! the task that waits for it, never the workers that run heartbeats and elections. The
//! `raft-log-io` failpoint sits in each such call (a test configures `pause`, `sleep(ms)`
//! or a callback there to stand for a slow disk).

mod tail;
mod writer;

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;

use openraft::storage::{LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader};
use rozone_kv::rocksdb::{Direction, IteratorMode, DB};
use rozone_kv::{cf, key_u64, u64_key, DbTuning};
use tokio::sync::oneshot;

use self::tail::Tail;
use self::writer::{Callback, Done, Op};

use crate::hook::AppendHook;
use crate::record;
use crate::types::{Entry, LogId, TypeConfig, Vote};

const CF_LOGS: &str = "logs";
const CF_META: &str = "meta";
const KEY_VOTE: &[u8] = b"vote";
const KEY_COMMITTED: &[u8] = b"committed";
const KEY_PURGED: &[u8] = b"last_purged";

/// The log store of one Raft group.
#[derive(Clone)]
pub struct RocksLogStore {
    db: Arc<DB>,
    tail: Arc<Tail>,
    writer: Arc<WriterThread>,
    /// Runs before each append (see [`AppendHook`]).
    hook: Option<Arc<dyn AppendHook>>,
}

/// The writer thread; joined when the last clone of the store is dropped (after it has
/// finished what is queued), so the database is closed before its owner returns (RocksDB
/// aborts if a DB outlives process exit).
struct WriterThread {
    tx: Option<std_mpsc::Sender<Op>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for WriterThread {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl RocksLogStore {
    /// Opens (or creates) the log database at `path`. `fsync`: sync appends (fsync the WAL)
    /// before acknowledging them; off only for tests and benchmarks of the CPU path.
    pub fn open(path: &Path, fsync: bool) -> io::Result<Self> {
        std::fs::create_dir_all(path)?;
        let db = rozone_kv::open(path, &[CF_LOGS, CF_META], &DbTuning::default())?;
        let tail = Arc::new(Tail::default());
        let (tx, rx) = std_mpsc::channel::<Op>();
        let (wdb, wtail) = (db.clone(), tail.clone());
        let thread = std::thread::Builder::new()
            .name("raft-log-write".into())
            .spawn(move || writer::run(wdb, fsync, wtail, rx))?;
        Ok(Self {
            db,
            tail,
            writer: Arc::new(WriterThread {
                tx: Some(tx),
                thread: Some(thread),
            }),
            hook: None,
        })
    }

    /// Queues `op` for the writer thread.
    fn send(&self, op: Op) -> io::Result<()> {
        self.writer
            .tx
            .as_ref()
            .ok_or_else(|| io::Error::other("log writer stopped"))?
            .send(op)
            .map_err(|_| io::Error::other("log writer thread stopped"))
    }

    /// Queues the op `make` builds and waits until the writer has done it.
    async fn write(&self, make: impl FnOnce(Done) -> Op) -> io::Result<()> {
        let (done, wait) = oneshot::channel();
        self.send(make(done))?;
        wait.await
            .map_err(|_| io::Error::other("log writer thread stopped"))?
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

    /// The entries `start..end` the database holds.
    fn read_entries(&self, start: u64, end: u64) -> io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        let it = self.db.iterator_cf(
            cf(&self.db, CF_LOGS)?,
            IteratorMode::From(&u64_key(start), Direction::Forward),
        );
        for item in it {
            let (k, v) = item.map_err(io::Error::other)?;
            let idx = key_u64(&k).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "log key is not 8 bytes")
            })?;
            if idx >= end {
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
}

/// `range` as `start..end` (end exclusive).
fn bounds<RB: RangeBounds<u64>>(range: &RB) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(x) => *x,
        Bound::Excluded(x) => x.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(x) => x.saturating_add(1),
        Bound::Excluded(x) => *x,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for RocksLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let (start, end) = bounds(&range);
        let (from, cached) = self.tail.read(start, end);
        if from <= start {
            return Ok(cached);
        }
        // Entries below the tail were written before they left it: the database has them.
        let mut out = self.io(move |s| s.read_entries(start, from)).await?;
        out.extend(cached);
        Ok(out)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        self.io(|s| s.stored_vote()).await
    }
}

impl RaftLogStorage<TypeConfig> for RocksLogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, io::Error> {
        // Rarely called (at start): let the writer catch up, then read the database.
        self.write(Op::Barrier).await?;
        self.io(|s| s.log_state()).await
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        let bytes = record::encode_vote(vote)?;
        // A vote must be durable before it is acted on: the writer syncs it.
        self.write(|done| Op::Vote { bytes, done }).await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        // Lazily persisted (it only spares re-applying entries after a restart), so nobody
        // waits: openraft calls this inline on its core task at every commit.
        self.send(Op::Committed(record::encode_log_id(&committed)?))
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        self.write(Op::Barrier).await?;
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
        let Some(start) = entries.first().map(openraft::entry::RaftEntry::index) else {
            callback.io_completed(Ok(()));
            return Ok(());
        };
        let mut rows = Vec::with_capacity(entries.len());
        let mut kept = Vec::with_capacity(entries.len());
        for entry in entries {
            let idx = openraft::entry::RaftEntry::index(&entry);
            let bytes = record::encode_entry(&entry)?;
            kept.push((entry, bytes.len()));
            rows.push((idx, bytes));
        }
        // Readable from the tail now; the writer writes, syncs and completes the callback.
        self.tail.push(start, kept);
        self.send(Op::Append { rows, callback })
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let from = last_log_id.map(|l| l.index() + 1).unwrap_or(0);
        self.write(|done| Op::Truncate { from, done }).await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        let bytes = record::encode_log_id(&Some(log_id))?;
        let upto = log_id.index();
        self.write(|done| Op::Purge { bytes, upto, done }).await
    }
}

#[cfg(test)]
mod tests;
