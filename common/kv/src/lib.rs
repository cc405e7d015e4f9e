//! rozone-kv: the RocksDB helpers every rozone store uses.
//!
//! Column families are opened by name, integer keys are big-endian so they sort, and every
//! database is opened with the same small, explicit tuning (rozone daemons must idle in well
//! under 64 MiB). Nothing here knows about Raft or any daemon.

use std::path::Path;
use std::sync::Arc;

pub use rocksdb;
use rocksdb::{BlockBasedOptions, Cache, ColumnFamilyDescriptor, Options, DB};

/// Errors of this crate: callers branch on `Corrupt` (bad bytes on disk) versus `Db`.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    #[error("rocksdb: {0}")]
    Db(#[from] rocksdb::Error),
    #[error("missing column family {0:?}")]
    MissingCf(String),
    #[error("corrupt value in {cf}: {what}")]
    Corrupt { cf: String, what: String },
}

impl From<KvError> for std::io::Error {
    fn from(e: KvError) -> Self {
        match e {
            KvError::Corrupt { .. } => std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            other => std::io::Error::other(other),
        }
    }
}

/// Tuning shared by all rozone databases.
#[derive(Debug, Clone)]
pub struct DbTuning {
    /// Memtable size per column family.
    pub write_buffer_size: usize,
    /// Block cache shared by all column families of one database.
    pub block_cache_bytes: usize,
}

impl Default for DbTuning {
    fn default() -> Self {
        Self {
            write_buffer_size: 4 << 20,
            block_cache_bytes: 8 << 20,
        }
    }
}

fn options(tuning: &DbTuning, cache: &Cache) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.set_write_buffer_size(tuning.write_buffer_size);
    opts.set_max_write_buffer_number(2);
    opts.set_max_background_jobs(2);
    opts.set_keep_log_file_num(2);
    opts.set_max_log_file_size(1 << 20);
    opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
    opts.set_block_based_table_factory(&table);
    opts
}

/// Opens (creating if missing) a database with the given column families.
pub fn open(path: &Path, cfs: &[&str], tuning: &DbTuning) -> Result<Arc<DB>, KvError> {
    let cache = Cache::new_lru_cache(tuning.block_cache_bytes);
    let opts = options(tuning, &cache);
    let descs = cfs
        .iter()
        .map(|name| ColumnFamilyDescriptor::new(*name, options(tuning, &cache)));
    Ok(Arc::new(DB::open_cf_descriptors(&opts, path, descs)?))
}

/// Opens an existing database read-only (e.g. a checkpoint being verified).
pub fn open_read_only(path: &Path, cfs: &[&str]) -> Result<DB, KvError> {
    let opts = Options::default();
    Ok(DB::open_cf_for_read_only(
        &opts,
        path,
        cfs.iter().copied(),
        false,
    )?)
}

/// The handle of a column family that must exist (it was named when the DB was opened).
pub fn cf<'a>(db: &'a DB, name: &str) -> Result<&'a rocksdb::ColumnFamily, KvError> {
    db.cf_handle(name)
        .ok_or_else(|| KvError::MissingCf(name.to_string()))
}

/// Big-endian encoding of an integer key, so keys sort numerically.
pub fn u64_key(v: u64) -> [u8; 8] {
    v.to_be_bytes()
}

/// Decodes a big-endian integer key; `None` when the bytes are not 8 long.
pub fn key_u64(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_numerically() {
        assert!(u64_key(2) < u64_key(256));
        assert_eq!(key_u64(&u64_key(77)), Some(77));
        assert_eq!(key_u64(b"short"), None);
    }

    #[test]
    fn open_with_cfs_and_reopen_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path(), &["a", "b"], &DbTuning::default()).unwrap();
        db.put_cf(cf(&db, "a").unwrap(), b"k", b"v").unwrap();
        assert!(matches!(cf(&db, "zz"), Err(KvError::MissingCf(_))));
        drop(db);
        let ro = open_read_only(dir.path(), &["a", "b"]).unwrap();
        assert_eq!(
            ro.get_cf(ro.cf_handle("a").unwrap(), b"k").unwrap(),
            Some(b"v".to_vec())
        );
    }
}
