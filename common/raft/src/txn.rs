//! A write transaction over the state-machine database for one applied batch.
//!
//! Every effect of a batch of entries, and the applied log id, goes into one `WriteBatch`.
//! Reads see the batch's own earlier writes first (an overlay), so entry N+1 of a batch sees
//! what entry N wrote, exactly as if each had been written alone.

use std::collections::BTreeMap;
use std::io;

use rozone_kv::cf;
use rozone_kv::rocksdb::{Direction, IteratorMode, WriteBatch, DB};

/// Pending writes of one batch plus read-through to the database.
pub struct Txn<'a> {
    db: &'a DB,
    /// cf name → key → Some(value) for a put, None for a delete.
    overlay: BTreeMap<String, BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
}

impl<'a> Txn<'a> {
    /// A transaction over `db` (the state machine creates one per applied batch; tests of
    /// application logic create their own).
    pub fn new(db: &'a DB) -> Self {
        Self {
            db,
            overlay: BTreeMap::new(),
        }
    }

    /// Reads a key, seeing this batch's writes first.
    pub fn get(&self, cf_name: &str, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        if let Some(v) = self.overlay.get(cf_name).and_then(|m| m.get(key)) {
            return Ok(v.clone());
        }
        self.db
            .get_cf(cf(self.db, cf_name)?, key)
            .map_err(io::Error::other)
    }

    pub fn put(&mut self, cf_name: &str, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.overlay
            .entry(cf_name.to_string())
            .or_default()
            .insert(key.into(), Some(value.into()));
    }

    pub fn delete(&mut self, cf_name: &str, key: impl Into<Vec<u8>>) {
        self.overlay
            .entry(cf_name.to_string())
            .or_default()
            .insert(key.into(), None);
    }

    /// Up to `limit` live entries whose key starts with `prefix` and is greater than `after`
    /// (if given), in key order, merging this batch's writes with the database.
    pub fn scan_prefix(
        &self,
        cf_name: &str,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> io::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut merged: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        let start = match after {
            Some(a) if a >= prefix => a.to_vec(),
            _ => prefix.to_vec(),
        };
        let it = self.db.iterator_cf(
            cf(self.db, cf_name)?,
            IteratorMode::From(&start, Direction::Forward),
        );
        let mut live_from_db = 0usize;
        for item in it {
            let (k, v) = item.map_err(io::Error::other)?;
            if !k.starts_with(prefix) {
                break;
            }
            if after.is_some_and(|a| k.as_ref() <= a) {
                continue;
            }
            merged.insert(k.to_vec(), Some(v.to_vec()));
            live_from_db += 1;
            // The overlay can delete at most as many keys as it holds; read that many extra.
            let slack = self.overlay.get(cf_name).map_or(0, |m| m.len());
            if live_from_db >= limit + slack {
                break;
            }
        }
        if let Some(m) = self.overlay.get(cf_name) {
            for (k, v) in m.range(start.clone()..) {
                if !k.starts_with(prefix) {
                    break;
                }
                if after.is_some_and(|a| k.as_slice() <= a) {
                    continue;
                }
                merged.insert(k.clone(), v.clone());
            }
        }
        Ok(merged
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .take(limit)
            .collect())
    }

    /// Turns the overlay into one write batch.
    pub fn into_batch(self) -> io::Result<WriteBatch> {
        let mut batch = WriteBatch::default();
        for (cf_name, m) in &self.overlay {
            let h = cf(self.db, cf_name)?;
            for (k, v) in m {
                match v {
                    Some(v) => batch.put_cf(h, k, v),
                    None => batch.delete_cf(h, k),
                }
            }
        }
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_reads_and_scans_merge_with_db() {
        let d = tempfile::tempdir().unwrap();
        let db = rozone_kv::open(d.path(), &["t"], &Default::default()).unwrap();
        let h = db.cf_handle("t").unwrap();
        for k in ["a1", "a2", "a3", "b1"] {
            db.put_cf(h, k, k).unwrap();
        }
        let mut t = Txn::new(&db);
        t.delete("t", "a2");
        t.put("t", "a4", "new");
        t.put("t", "a1", "changed");
        assert_eq!(t.get("t", b"a2").unwrap(), None);
        assert_eq!(t.get("t", b"a1").unwrap(), Some(b"changed".to_vec()));
        let keys: Vec<_> = t
            .scan_prefix("t", b"a", None, 10)
            .unwrap()
            .into_iter()
            .map(|(k, _)| String::from_utf8(k).unwrap())
            .collect();
        assert_eq!(keys, ["a1", "a3", "a4"]);
        let page = t.scan_prefix("t", b"a", Some(b"a1"), 1).unwrap();
        assert_eq!(page[0].0, b"a3");
        db.write(t.into_batch().unwrap()).unwrap();
        assert_eq!(db.get_cf(h, "a2").unwrap(), None);
    }
}
