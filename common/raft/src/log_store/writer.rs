//! The log's writer thread: every change to the log database, in the order it was asked.
//!
//! Appends queued while the thread was busy go into one `WriteBatch` written with one
//! fsync (group commit), and their callbacks complete together. One thread doing the
//! writes, instead of the blocking pool writing and this thread syncing, takes a thread
//! hand-off off every append, and keeps truncations and purges ordered after the appends
//! before them without locks: a truncation can never be overtaken by the write of an entry
//! it removes.
//!
//! The `raft-log-io` failpoint sits in each database call here, as in the store's reads.

use std::io;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;

use openraft::storage::IOFlushed;
use rozone_kv::rocksdb::{WriteBatch, WriteOptions, DB};
use rozone_kv::{cf, u64_key};
use tokio::sync::oneshot;

use super::tail::Tail;
use super::{CF_LOGS, CF_META, KEY_COMMITTED, KEY_PURGED, KEY_VOTE};
use crate::types::TypeConfig;

pub(super) type Callback = IOFlushed<TypeConfig>;
pub(super) type Done = oneshot::Sender<io::Result<()>>;

/// One change to the log database.
pub(super) enum Op {
    /// Encoded entries `(index, bytes)` in order; `callback` completes once they are synced.
    Append {
        rows: Vec<(u64, Vec<u8>)>,
        callback: Callback,
    },
    /// The committed log id, encoded. Lazily persisted: written with the next batch, and
    /// nobody waits for it.
    Committed(Vec<u8>),
    /// The vote, encoded; synced before `done`.
    Vote { bytes: Vec<u8>, done: Done },
    /// Remove entries from this index on; synced before `done`.
    Truncate { from: u64, done: Done },
    /// Record the purge point (synced), then remove entries up to and including `upto`.
    Purge {
        bytes: Vec<u8>,
        upto: u64,
        done: Done,
    },
    /// Everything queued before it is written before `done`.
    Barrier(Done),
}

/// The writer's loop: runs until every sender is gone, after finishing what is queued.
pub(super) fn run(db: Arc<DB>, fsync: bool, tail: Arc<Tail>, rx: std_mpsc::Receiver<Op>) {
    let w = Writer { db, fsync, tail };
    while let Ok(first) = rx.recv() {
        let mut group = Group::default();
        for op in std::iter::once(first).chain(rx.try_iter()) {
            match op {
                Op::Append { rows, callback } => group.append(&w, rows, callback),
                Op::Committed(bytes) => group.committed(&w, bytes),
                Op::Vote { bytes, done } => {
                    group.finish(&w);
                    let _ = done.send(w.write_meta(KEY_VOTE, bytes));
                }
                Op::Truncate { from, done } => {
                    group.finish(&w);
                    let _ = done.send(w.truncate_from(from));
                }
                Op::Purge { bytes, upto, done } => {
                    group.finish(&w);
                    let _ = done.send(w.purge_upto(bytes, upto));
                }
                Op::Barrier(done) => {
                    group.finish(&w);
                    let _ = done.send(Ok(()));
                }
            }
        }
        group.finish(&w);
    }
}

struct Writer {
    db: Arc<DB>,
    fsync: bool,
    tail: Arc<Tail>,
}

impl Writer {
    fn write(&self, batch: WriteBatch, sync: bool) -> io::Result<()> {
        fail::fail_point!("raft-log-io");
        let mut wo = WriteOptions::default();
        wo.set_sync(sync && self.fsync);
        self.db.write_opt(batch, &wo).map_err(io::Error::other)
    }

    fn write_meta(&self, key: &[u8], bytes: Vec<u8>) -> io::Result<()> {
        let mut batch = WriteBatch::default();
        batch.put_cf(cf(&self.db, CF_META)?, key, bytes);
        self.write(batch, true)
    }

    fn truncate_from(&self, from: u64) -> io::Result<()> {
        let logs = cf(&self.db, CF_LOGS)?;
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(logs, u64_key(from), u64_key(u64::MAX));
        batch.delete_cf(logs, u64_key(u64::MAX));
        // Synced: truncated entries must not come back after a crash and be re-appended as
        // if they were the leader's.
        self.write(batch, true)?;
        self.tail.truncate(from);
        Ok(())
    }

    fn purge_upto(&self, bytes: Vec<u8>, upto: u64) -> io::Result<()> {
        // The purge point first: entries at or below it are ignored even if the range
        // delete below is lost in a crash.
        self.write_meta(KEY_PURGED, bytes)?;
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(
            cf(&self.db, CF_LOGS)?,
            u64_key(0),
            u64_key(upto.saturating_add(1)),
        );
        self.write(batch, false)?;
        self.tail.purge(upto);
        Ok(())
    }
}

/// The appends (and committed id) of one round, written as one batch.
#[derive(Default)]
struct Group {
    batch: Option<WriteBatch>,
    callbacks: Vec<Callback>,
    /// One past the last index in the batch.
    end: Option<u64>,
}

impl Group {
    fn append(&mut self, w: &Writer, rows: Vec<(u64, Vec<u8>)>, callback: Callback) {
        match cf(&w.db, CF_LOGS) {
            Ok(logs) => {
                // Created before the rows: `finish` completes callbacks only with a batch.
                let batch = self.batch.get_or_insert_with(WriteBatch::default);
                for (idx, bytes) in rows {
                    batch.put_cf(logs, u64_key(idx), bytes);
                    self.end = Some(idx.saturating_add(1));
                }
                self.callbacks.push(callback);
            }
            Err(e) => callback.io_completed(Err(e.into())),
        }
    }

    fn committed(&mut self, w: &Writer, bytes: Vec<u8>) {
        // Lazily persisted, so a lost write only costs re-applying entries after a restart.
        if let Ok(meta) = cf(&w.db, CF_META) {
            self.batch
                .get_or_insert_with(WriteBatch::default)
                .put_cf(meta, KEY_COMMITTED, bytes);
        }
    }

    /// Writes the batch, synced when it holds appends, and completes their callbacks.
    fn finish(&mut self, w: &Writer) {
        let Some(batch) = self.batch.take() else {
            return;
        };
        let callbacks = std::mem::take(&mut self.callbacks);
        let res = w.write(batch, !callbacks.is_empty());
        if let (Ok(()), Some(end)) = (&res, self.end.take()) {
            w.tail.written(end);
        }
        for cb in callbacks {
            let r = match &res {
                Ok(()) => Ok(()),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            };
            cb.io_completed(r);
        }
    }
}
