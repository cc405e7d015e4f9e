//! The log's newest entries, kept in memory.
//!
//! openraft reads back what it has just appended: the leader's replication streams read
//! each new entry once per follower, and the state-machine worker reads every committed
//! entry to apply it. Served from RocksDB, each such read was a trip through the blocking
//! pool on the commit path. The tail answers them from memory, and it is also what makes an
//! append readable at once while the writer thread has not yet put it in RocksDB.
//!
//! Invariant: the tail is a contiguous run `first..=last` equal to the log's entries at
//! those indexes, and when it is not empty `last` is the log's last entry. Entries leave
//! the front only once the writer has written them (so a read below `first` finds them in
//! RocksDB), and only while the tail is over its bounds.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::types::Entry;

/// At most this many entries are kept once written. Enough for openraft's in-flight
/// appends and apply batches; a follower further behind is served from RocksDB.
const MAX_ENTRIES: usize = 1024;
/// And at most this many encoded bytes, so large entries do not pin much memory.
const MAX_BYTES: usize = 4 << 20;

/// See the module documentation.
#[derive(Default)]
pub(super) struct Tail {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Each entry with its encoded size.
    entries: VecDeque<(Entry, usize)>,
    /// The index of `entries[0]`.
    first: u64,
    bytes: usize,
    /// Entries up to this index (exclusive) are in RocksDB and may be dropped.
    written_end: u64,
}

impl Inner {
    fn end(&self) -> u64 {
        self.first + self.entries.len() as u64
    }

    fn evict(&mut self) {
        while (self.entries.len() > MAX_ENTRIES || self.bytes > MAX_BYTES)
            && self.first < self.written_end
        {
            match self.entries.pop_front() {
                Some((_, n)) => {
                    self.bytes -= n;
                    self.first += 1;
                }
                None => break,
            }
        }
    }
}

impl Tail {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave `Inner` half-updated in a way that
        // matters more than the panic itself; keep serving.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds appended entries (in index order, starting at `start`). openraft appends right
    /// after the last entry (it truncates first when it overwrites), so a run that does not
    /// follow the tail can only follow a log whose tail is not held here: it starts a new
    /// tail.
    pub(super) fn push(&self, start: u64, entries: Vec<(Entry, usize)>) {
        let mut t = self.lock();
        if t.entries.is_empty() || t.end() != start {
            t.entries.clear();
            t.bytes = 0;
            t.first = start;
        }
        for (e, n) in entries {
            t.bytes += n;
            t.entries.push_back((e, n));
        }
        t.evict();
    }

    /// The writer has written everything below `end`.
    pub(super) fn written(&self, end: u64) {
        let mut t = self.lock();
        t.written_end = t.written_end.max(end);
        t.evict();
    }

    /// Entries from `from` on are gone from the log.
    pub(super) fn truncate(&self, from: u64) {
        let mut t = self.lock();
        while t.end() > from {
            match t.entries.pop_back() {
                Some((_, n)) => t.bytes -= n,
                None => break,
            }
        }
        if t.entries.is_empty() {
            t.first = from;
        }
        // What is written again at these indexes is new.
        t.written_end = t.written_end.min(from);
    }

    /// Entries up to and including `upto` are purged.
    pub(super) fn purge(&self, upto: u64) {
        let mut t = self.lock();
        while t.first <= upto {
            match t.entries.pop_front() {
                Some((_, n)) => {
                    t.bytes -= n;
                    t.first += 1;
                }
                None => break,
            }
        }
    }

    /// The part of `start..end` held here: `(from, entries)` where `entries` are the log's
    /// entries `from..end` (those that exist). The caller reads `start..from` from RocksDB.
    pub(super) fn read(&self, start: u64, end: u64) -> (u64, Vec<Entry>) {
        let t = self.lock();
        if t.entries.is_empty() || end <= start {
            return (end.max(start), Vec::new());
        }
        let from = t.first.clamp(start, end);
        let upto = end.min(t.end());
        let out = if from < upto {
            let skip = (from - t.first) as usize;
            let take = (upto - from) as usize;
            t.entries
                .iter()
                .skip(skip)
                .take(take)
                .map(|(e, _)| e.clone())
                .collect()
        } else {
            Vec::new()
        };
        (from, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::log_id;
    use openraft::entry::RaftEntry;

    fn entries(from: u64, to: u64) -> Vec<(Entry, usize)> {
        (from..=to)
            .map(|i| (Entry::new_blank(log_id(1, 1, i)), 10))
            .collect()
    }

    fn indexes(v: &[Entry]) -> Vec<u64> {
        v.iter().map(openraft::entry::RaftEntry::index).collect()
    }

    #[test]
    fn reads_split_between_memory_and_the_database() {
        let t = Tail::default();
        assert_eq!(t.read(0, 10), (10, vec![]), "empty: all from the database");
        t.push(5, entries(5, 9));
        let (from, got) = t.read(0, 100);
        assert_eq!((from, indexes(&got)), (5, vec![5, 6, 7, 8, 9]));
        let (from, got) = t.read(6, 8);
        assert_eq!((from, indexes(&got)), (6, vec![6, 7]));
        assert_eq!(t.read(0, 3).0, 3, "below the tail: all from the database");
        assert_eq!(t.read(12, 20), (12, vec![]), "past the log's end: nothing");
    }

    #[test]
    fn truncate_and_purge_keep_the_run_exact() {
        let t = Tail::default();
        t.push(1, entries(1, 6));
        t.truncate(4);
        assert_eq!(indexes(&t.read(0, 100).1), vec![1, 2, 3]);
        t.push(4, entries(4, 5));
        t.purge(2);
        let (from, got) = t.read(0, 100);
        assert_eq!((from, indexes(&got)), (3, vec![3, 4, 5]));
        t.truncate(0);
        assert_eq!(t.read(0, 100), (100, vec![]));
        // A run that does not follow the tail replaces it.
        t.push(7, entries(7, 8));
        t.push(20, entries(20, 20));
        assert_eq!(t.read(0, 100).0, 20);
    }

    #[test]
    fn only_written_entries_leave_and_only_over_the_bounds() {
        let t = Tail::default();
        let n = MAX_ENTRIES as u64 + 10;
        t.push(1, entries(1, n));
        assert_eq!(t.read(0, u64::MAX).0, 1, "nothing written: all kept");
        t.written(6);
        assert_eq!(t.read(0, u64::MAX).0, 6, "written ones leave while over");
        t.written(n + 1);
        assert_eq!(t.read(0, u64::MAX).0, 11, "down to the bound, no further");
        // A truncation forgets what was written at the indexes it frees: the new entries
        // there are not written yet, so none of them leaves even over the bounds.
        t.truncate(11);
        t.push(11, entries(11, 11 + MAX_ENTRIES as u64 + 5));
        assert_eq!(t.read(0, u64::MAX).0, 11);
    }
}
