//! The replicated retry cache: a write proposed for a client's call (a [`CallTag`] in its
//! entry, see `rozone_rpc::call`) is applied once; the same call's write arriving again —
//! the client resent it after an attempt whose answer it never got — is answered with the
//! first one's reply and changes nothing.
//!
//! Unlike Ratis's retry cache (memory of the node that applied the entry), the records are
//! rows of the state database, written in the same batch as the write's effects: they
//! survive restarts, travel in snapshots and are the same on every member, so a retry that
//! reaches a new leader, or a member restarted since, is still recognised.
//!
//! Records are kept until the client says the call has ended (its `low` passed the call's
//! number, Raft's client sessions in Ongaro's dissertation §6.3) or for [`TTL_MS`] after the
//! stamp of the entry that wrote them, whichever comes first; the TTL bounds what a client
//! that went away leaves behind. Both are decided by entries only (the client's `low` and the
//! leader's stamp travel in the log), never by a member's own clock, so every member prunes
//! the same rows. An in-memory index of the rows (rebuilt from the database at open and after
//! a snapshot install) lets a fresh call skip the database read and pruning find its rows
//! without scanning over deleted ones.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use rozone_kv::cf;
use rozone_kv::rocksdb::{Direction, IteratorMode, DB};
use serde::{Deserialize, Serialize};

use crate::envelope;
pub use crate::envelope::CallTag;
use crate::state_machine::CF_RAFT_META;
use crate::txn::Txn;

/// How long a record lives after the entry that wrote it, at most: far longer than any
/// client keeps retrying one call (the ring's default deadline is 30 s). A constant, not a
/// setting: every member must prune the same rows.
pub const TTL_MS: u64 = 10 * 60 * 1000;

/// At most this many rows are pruned per applied write, so one entry's apply stays short;
/// the rest go with the next writes.
const PRUNE_PER_WRITE: usize = 64;

const PREFIX: &[u8] = b"rc/";

/// What the cache did, for `/metrics`.
#[derive(Debug, Default)]
pub struct Stats {
    /// Writes answered from the cache instead of being applied again.
    pub hits: AtomicU64,
    /// Records held now.
    pub entries: AtomicU64,
}

/// One call's write as remembered.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    stamp_ms: u64,
    /// The request's kind (see [`envelope::request_kind`]): a repeat of another kind is not
    /// this write (a handler that took another path on its retry) and is applied.
    kind: u32,
    /// The encoded response.
    reply: Vec<u8>,
}

type Key = (u64, u64, u32);

/// The index of the records in the state database.
#[derive(Debug, Default)]
pub struct RetryCache {
    /// (client, seq, sub) → stamp.
    rows: BTreeMap<Key, u64>,
    /// (stamp, client, seq, sub), for the TTL.
    by_stamp: BTreeSet<(u64, Key)>,
}

fn row_key(k: Key) -> Vec<u8> {
    let mut b = Vec::with_capacity(PREFIX.len() + 20);
    b.extend_from_slice(PREFIX);
    b.extend_from_slice(&k.0.to_be_bytes());
    b.extend_from_slice(&k.1.to_be_bytes());
    b.extend_from_slice(&k.2.to_be_bytes());
    b
}

fn parse_key(b: &[u8]) -> Option<Key> {
    let b = b.strip_prefix(PREFIX)?;
    if b.len() != 20 {
        return None;
    }
    Some((
        u64::from_be_bytes(b[..8].try_into().ok()?),
        u64::from_be_bytes(b[8..16].try_into().ok()?),
        u32::from_be_bytes(b[16..].try_into().ok()?),
    ))
}

fn key_of(t: &CallTag) -> Key {
    (t.client, t.seq, t.sub)
}

impl RetryCache {
    /// The index of the records in `db` (at open, after a snapshot install).
    pub fn load(db: &DB) -> io::Result<Self> {
        let h = cf(db, CF_RAFT_META)?;
        let mut c = Self::default();
        for item in db.iterator_cf(h, IteratorMode::From(PREFIX, Direction::Forward)) {
            let (k, v) = item.map_err(io::Error::other)?;
            if !k.starts_with(PREFIX) {
                break;
            }
            let key = parse_key(&k).ok_or_else(|| bad("a retry-cache row key"))?;
            let r: Record = envelope::open(&v, "retry-cache row")?;
            c.insert(key, r.stamp_ms);
        }
        Ok(c)
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn insert(&mut self, key: Key, stamp: u64) {
        if let Some(old) = self.rows.insert(key, stamp) {
            self.by_stamp.remove(&(old, key));
        }
        self.by_stamp.insert((stamp, key));
    }

    fn remove(&mut self, txn: &mut Txn<'_>, key: Key) {
        if let Some(stamp) = self.rows.remove(&key) {
            self.by_stamp.remove(&(stamp, key));
            txn.delete(CF_RAFT_META, row_key(key));
        }
    }

    /// The reply remembered for this call's write, if it was applied before as a request of
    /// the same `kind`.
    pub fn lookup(&self, txn: &Txn<'_>, tag: &CallTag, kind: u32) -> io::Result<Option<Vec<u8>>> {
        if !self.rows.contains_key(&key_of(tag)) {
            return Ok(None);
        }
        let Some(v) = txn.get(CF_RAFT_META, &row_key(key_of(tag)))? else {
            return Err(bad(
                "a retry-cache row in the index but not in the database",
            ));
        };
        let r: Record = envelope::open(&v, "retry-cache row")?;
        Ok((r.kind == kind).then_some(r.reply))
    }

    /// Remembers the reply of this call's write (applied just now, in `txn`'s batch), then
    /// drops the records the tag says are no longer needed.
    pub fn remember(
        &mut self,
        txn: &mut Txn<'_>,
        tag: &CallTag,
        kind: u32,
        reply: Vec<u8>,
    ) -> io::Result<()> {
        let key = key_of(tag);
        let row = envelope::seal(&Record {
            stamp_ms: tag.stamp_ms,
            kind,
            reply,
        })?;
        txn.put(CF_RAFT_META, row_key(key), row);
        self.insert(key, tag.stamp_ms);
        self.prune(txn, tag);
        Ok(())
    }

    fn prune(&mut self, txn: &mut Txn<'_>, tag: &CallTag) {
        // The client's ended calls.
        let ended: Vec<Key> = self
            .rows
            .range((tag.client, 0, 0)..(tag.client, tag.low, 0))
            .take(PRUNE_PER_WRITE)
            .map(|(k, _)| *k)
            .collect();
        for k in ended {
            self.remove(txn, k);
        }
        // Anyone's records older than the TTL, by this entry's stamp.
        let cutoff = tag.stamp_ms.saturating_sub(TTL_MS);
        let expired: Vec<Key> = self
            .by_stamp
            .iter()
            .take_while(|(stamp, _)| *stamp < cutoff)
            .take(PRUNE_PER_WRITE)
            .map(|(_, k)| *k)
            .collect();
        for k in expired {
            self.remove(txn, k);
        }
    }
}

impl Stats {
    pub(crate) fn hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn set_entries(&self, n: usize) {
        self.entries.store(n as u64, Ordering::Relaxed);
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("malformed {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> (tempfile::TempDir, std::sync::Arc<DB>) {
        let d = tempfile::tempdir().unwrap();
        let db = rozone_kv::open(d.path(), &[CF_RAFT_META], &Default::default()).unwrap();
        (d, db)
    }

    fn tag(client: u64, seq: u64, sub: u32, low: u64, stamp_ms: u64) -> CallTag {
        CallTag {
            client,
            seq,
            sub,
            low,
            stamp_ms,
        }
    }

    fn commit(db: &DB, txn: Txn<'_>) {
        db.write(txn.into_batch().unwrap()).unwrap();
    }

    #[test]
    fn a_repeat_gets_the_first_reply_only_for_the_same_kind() {
        let (_d, db) = db();
        let mut c = RetryCache::default();
        let t = tag(1, 5, 0, 5, 1_000);
        let mut txn = Txn::new(&db);
        assert_eq!(c.lookup(&txn, &t, 3).unwrap(), None);
        c.remember(&mut txn, &t, 3, b"first".to_vec()).unwrap();
        // Seen within the same batch (the overlay) and after it is written.
        assert_eq!(c.lookup(&txn, &t, 3).unwrap(), Some(b"first".to_vec()));
        commit(&db, txn);
        let txn = Txn::new(&db);
        assert_eq!(c.lookup(&txn, &t, 3).unwrap(), Some(b"first".to_vec()));
        assert_eq!(c.lookup(&txn, &t, 4).unwrap(), None, "another kind");
        let other_sub = tag(1, 5, 1, 5, 1_000);
        assert_eq!(c.lookup(&txn, &other_sub, 3).unwrap(), None);
        // The index comes back from the database alone.
        let loaded = RetryCache::load(&db).unwrap();
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded.lookup(&txn, &t, 3).unwrap(), Some(b"first".to_vec()));
    }

    /// A tagged request (format 2) and a cache row, as this format's first build wrote
    /// them, decode in every later build.
    #[test]
    fn tagged_requests_and_rows_match_their_golden_bytes() {
        let golden = |n: &str| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("golden")
                .join(n)
        };
        let t = tag(0x0102_0304_0506_0708, 42, 1, 40, 1_764_000_000_000);
        let reqs = [("tagged-request", (t, (3u32, "vol".to_string())))];
        crate::golden::check(
            &golden("call-tags-v2.txt"),
            &reqs,
            |(t, r)| envelope::seal_call(t, r),
            |b| {
                let (t, r) = envelope::open_request::<(u32, String)>(b)?;
                Ok((t.expect("a tag"), r))
            },
        );
        #[derive(Debug, PartialEq)]
        struct Row(u64, u32, Vec<u8>);
        let rows = [("row", Row(1_764_000_000_000, 7, b"reply".to_vec()))];
        crate::golden::check(
            &golden("retry-cache-rows-v1.txt"),
            &rows,
            |r| {
                envelope::seal(&Record {
                    stamp_ms: r.0,
                    kind: r.1,
                    reply: r.2.clone(),
                })
            },
            |b| {
                let r: Record = envelope::open(b, "row")?;
                Ok(Row(r.stamp_ms, r.kind, r.reply))
            },
        );
    }

    #[test]
    fn ended_calls_and_old_records_are_pruned_by_what_entries_carry() {
        let (_d, db) = db();
        let mut c = RetryCache::default();
        let mut txn = Txn::new(&db);
        for seq in 1..=3 {
            c.remember(&mut txn, &tag(1, seq, 0, 1, 1_000), 0, vec![])
                .unwrap();
        }
        c.remember(&mut txn, &tag(2, 1, 0, 1, 1_000), 0, vec![])
            .unwrap();
        assert_eq!(c.len(), 4);
        // Client 1 says calls below 3 ended: 1 and 2 go, its 3 and client 2's stay.
        c.remember(&mut txn, &tag(1, 4, 0, 3, 2_000), 0, vec![])
            .unwrap();
        assert_eq!(
            c.rows.keys().copied().collect::<Vec<_>>(),
            vec![(1, 3, 0), (1, 4, 0), (2, 1, 0)]
        );
        commit(&db, txn);
        assert_eq!(RetryCache::load(&db).unwrap().len(), 3);
        // An entry stamped past the TTL of the old ones removes them (client 3 writing).
        let mut txn = Txn::new(&db);
        c.remember(&mut txn, &tag(3, 1, 0, 1, 1_001 + TTL_MS), 0, vec![])
            .unwrap();
        assert_eq!(
            c.rows.keys().copied().collect::<Vec<_>>(),
            vec![(1, 4, 0), (3, 1, 0)]
        );
        commit(&db, txn);
        let loaded = RetryCache::load(&db).unwrap();
        assert_eq!(loaded.rows, c.rows);
        assert_eq!(loaded.by_stamp, c.by_stamp);
    }
}
