//! One data directory: its RocksDB (descriptors, blocks, chunks keyed by container id), its
//! container directories, a staging area, and capacity accounting.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rozone_kv::rocksdb::{Direction, IteratorMode, WriteBatch, WriteOptions, DB};
use rozone_kv::{cf, key_u64, u64_key, DbTuning};
use rozone_types::BlockId;

use super::check::Statfs;
use super::digest::ContentDigest;
use super::faults::{self, Fault, VolumeHealth};
use crate::error::DnError;
use crate::types::{BlockData, ChunkInfo, ContainerState, Descriptor};

const CF_CONTAINERS: &str = "containers";
const CF_BLOCKS: &str = "blocks";
const CF_CHUNKS: &str = "chunks";
/// Content digest per container ([`ContentDigest`]'s versioned record), written in the same
/// batch as the descriptor.
const CF_DIGESTS: &str = "digests";

pub struct Volume {
    root: PathBuf,
    db: Arc<DB>,
    /// Configured capacity (0: the filesystem's size).
    capacity: u64,
    used: AtomicU64,
    /// Failed / full ([`faults`]).
    health: VolumeHealth,
    /// The filesystem's size and free space, as the background check last read them
    /// ([`super::check`]): readers never call statvfs themselves.
    statfs: Statfs,
}

fn block_key(b: BlockId) -> Vec<u8> {
    let mut k = u64_key(b.container_id).to_vec();
    k.extend_from_slice(&u64_key(b.local_id));
    k
}

fn chunk_key(b: BlockId, offset: u64) -> Vec<u8> {
    let mut k = block_key(b);
    k.extend_from_slice(&u64_key(offset));
    k
}

fn decode<T: serde::de::DeserializeOwned>(what: &str, b: &[u8]) -> Result<T, DnError> {
    rozone_raft::codec::decode(b).map_err(|e| DnError::io(&format!("decode {what}"), e))
}

fn encode<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, DnError> {
    rozone_raft::codec::encode(v).map_err(|e| DnError::io("encode", e))
}

impl Volume {
    pub fn open(root: &Path, capacity: u64) -> Result<Self, DnError> {
        for d in [root.join("containers"), root.join("tmp")] {
            std::fs::create_dir_all(&d)
                .map_err(|e| DnError::io(&format!("create {}", d.display()), e))?;
        }
        let db = rozone_kv::open(
            &root.join("db"),
            &[CF_CONTAINERS, CF_BLOCKS, CF_CHUNKS, CF_DIGESTS],
            &DbTuning::default(),
        )?;
        Ok(Self {
            root: root.to_path_buf(),
            db,
            capacity,
            used: AtomicU64::new(0),
            health: VolumeHealth::default(),
            // The first reading inline: opening already does I/O on this disk (RocksDB),
            // and placement needs a size before the background check first runs.
            statfs: Statfs::read(root),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn container_dir(&self, cid: u64) -> PathBuf {
        self.root.join("containers").join(cid.to_string())
    }

    pub fn block_file(&self, b: BlockId) -> PathBuf {
        self.container_dir(b.container_id)
            .join("chunks")
            .join(format!("{}.block", b.local_id))
    }

    /// A fresh path in the staging area (same filesystem as the containers).
    pub fn tmp_path(&self, what: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        self.root.join("tmp").join(format!("{what}-{nanos}-{n}"))
    }

    /// Why the volume failed, if it did ([`faults`]).
    pub fn failed(&self) -> Option<String> {
        self.health.failed()
    }

    pub fn is_failed(&self) -> bool {
        self.health.is_failed()
    }

    /// Marks the volume failed for the life of the process (a check found it hung).
    pub fn mark_failed(&self, why: &str) {
        if self.health.fail(why) {
            tracing::error!(volume = %self.root.display(), reason = why, "volume FAILED: its containers are no longer served or reported");
        }
    }

    /// The last statvfs reading ([`super::check`]).
    pub fn statfs(&self) -> &Statfs {
        &self.statfs
    }

    /// Whether the volume hit ENOSPC and no space was freed since (probed at most every
    /// [`faults::PROBE_EVERY`]).
    pub fn is_full(&self) -> bool {
        self.health
            .is_full(faults::PROBE_EVERY, || self.probe_space())
    }

    /// Whether [`faults::PROBE_BYTES`] can be written (and synced) here now.
    fn probe_space(&self) -> bool {
        use std::io::Write;
        let p = self.tmp_path("space-probe");
        let r = self.injected().and_then(|()| {
            let mut f = std::fs::File::create(&p)?;
            f.write_all(&vec![0u8; faults::PROBE_BYTES])?;
            f.sync_data()
        });
        remove(&p);
        if r.is_ok() {
            tracing::info!(volume = %self.root.display(), "volume has room again");
        }
        r.is_ok()
    }

    /// True once after the volume failed (its containers are then reported gone).
    pub fn take_newly_failed(&self) -> bool {
        self.health.take_newly_failed()
    }

    /// Whether new data may go here: not failed, not full.
    pub fn accepts_data(&self) -> bool {
        !self.is_failed() && !self.is_full()
    }

    /// The `dn-disk-fault` failpoint for this volume (before file I/O).
    pub fn injected(&self) -> std::io::Result<()> {
        faults::injected(&self.root)
    }

    /// A file I/O error on this volume as a [`DnError`], recording what it means for the
    /// volume: EIO and the like fail it, ENOSPC marks it full (`DISK_FULL`), the rest is
    /// transient and condemns nothing.
    pub fn fault(&self, what: &str, e: std::io::Error) -> DnError {
        self.record(what, faults::classify(&e), &e.to_string())
    }

    /// A RocksDB write error on this volume, as [`Volume::fault`].
    fn db_fault(&self, e: rozone_kv::rocksdb::Error) -> DnError {
        let msg = e.to_string();
        self.record("write container database", faults::classify_db(&msg), &msg)
    }

    fn record(&self, what: &str, fault: Fault, e: &str) -> DnError {
        let root = self.root.display();
        match fault {
            Fault::Full => {
                self.health.set_full();
                tracing::warn!(volume = %root, what, error = e, "volume full");
                DnError::new(
                    rozone_types::codes::DnCode::DiskFull,
                    format!("disk full: {what} on volume {root}: {e}"),
                )
            }
            Fault::Failed => {
                let why = format!("{what}: {e}");
                if self.health.fail(&why) {
                    tracing::error!(volume = %root, reason = %why, "volume FAILED: its containers are no longer served or reported");
                }
                DnError::io(&format!("volume {root} failed: {what}"), e)
            }
            Fault::Transient => DnError::io(what, e),
        }
    }

    /// A data write on this volume succeeded: it is not full any more.
    pub fn wrote(&self) {
        self.health.wrote();
    }

    /// Capacity, used bytes, remaining bytes (none while full).
    pub fn space(&self) -> (u64, u64, u64) {
        let used = self.used.load(Ordering::Relaxed);
        let fs = self.statfs.get();
        let capacity = if self.capacity > 0 {
            self.capacity
        } else {
            fs.map(|f| f.0).unwrap_or(0)
        };
        let mut remaining = capacity.saturating_sub(used);
        if let Some((_, free)) = fs {
            remaining = remaining.min(free);
        }
        if self.is_full() {
            remaining = 0;
        }
        (capacity, used, remaining)
    }

    pub fn set_used(&self, v: u64) {
        self.used.store(v, Ordering::Relaxed);
    }

    pub fn adjust_used(&self, old: u64, new: u64) {
        if new >= old {
            self.used.fetch_add(new - old, Ordering::Relaxed);
        } else {
            let _ = self
                .used
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                    Some(u.saturating_sub(old - new))
                });
        }
    }

    pub fn write(&self, batch: WriteBatch, sync: bool) -> Result<(), DnError> {
        if let Some(why) = self.failed() {
            return Err(DnError::io(
                &format!("volume {} failed", self.root.display()),
                why,
            ));
        }
        self.injected()
            .map_err(|e| self.fault("write container database", e))?;
        let mut wo = WriteOptions::default();
        wo.set_sync(sync);
        self.db.write_opt(batch, &wo).map_err(|e| self.db_fault(e))
    }

    pub fn load_descriptors(&self) -> Result<Vec<Descriptor>, DnError> {
        let mut out = Vec::new();
        for item in self
            .db
            .iterator_cf(cf(&self.db, CF_CONTAINERS)?, IteratorMode::Start)
        {
            let (k, v) = item?;
            let mut d: Descriptor = decode("container descriptor", &v)?;
            if key_u64(&k) != Some(d.id) {
                return Err(DnError::io(
                    "container table",
                    format!("key does not match descriptor {}", d.id),
                ));
            }
            d.digest = match self.db.get_cf(cf(&self.db, CF_DIGESTS)?, u64_key(d.id))? {
                Some(rec) => ContentDigest::decode(&rec)?,
                // Written before digests were kept: computed once from the blocks.
                None if d.state != ContainerState::Deleted => {
                    ContentDigest::of(&self.blocks(d.id, 0, usize::MAX)?)
                }
                None => ContentDigest::default(),
            };
            out.push(d);
        }
        Ok(out)
    }

    /// Removes staging leftovers and container directories without a live descriptor
    /// (an import or creation interrupted before its descriptor was written).
    pub fn cleanup_orphans(&self, is_live: impl Fn(u64) -> bool) -> Result<(), DnError> {
        let tmp = self.root.join("tmp");
        for e in std::fs::read_dir(&tmp).map_err(|e| DnError::io("list tmp", e))? {
            let p = e.map_err(|e| DnError::io("list tmp", e))?.path();
            remove(&p);
        }
        let cdir = self.root.join("containers");
        for e in std::fs::read_dir(&cdir).map_err(|e| DnError::io("list containers", e))? {
            let e = e.map_err(|e| DnError::io("list containers", e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            match name.parse::<u64>() {
                Ok(cid) if is_live(cid) => {}
                _ => {
                    tracing::warn!(path = %e.path().display(), "removing container directory without a descriptor");
                    remove(&e.path());
                }
            }
        }
        Ok(())
    }

    /// The descriptor and its content digest (one batch: they never disagree on disk).
    pub fn put_descriptor(&self, batch: &mut WriteBatch, d: &Descriptor) -> Result<(), DnError> {
        batch.put_cf(cf(&self.db, CF_CONTAINERS)?, u64_key(d.id), encode(d)?);
        batch.put_cf(cf(&self.db, CF_DIGESTS)?, u64_key(d.id), d.digest.encode());
        Ok(())
    }

    pub fn get_block(&self, b: BlockId) -> Result<Option<BlockData>, DnError> {
        match self.db.get_cf(cf(&self.db, CF_BLOCKS)?, block_key(b))? {
            Some(v) => Ok(Some(decode("block", &v)?)),
            None => Ok(None),
        }
    }

    pub fn put_block(&self, batch: &mut WriteBatch, b: &BlockData) -> Result<(), DnError> {
        batch.put_cf(cf(&self.db, CF_BLOCKS)?, block_key(b.id), encode(b)?);
        Ok(())
    }

    pub fn delete_block(&self, batch: &mut WriteBatch, b: BlockId) -> Result<(), DnError> {
        batch.delete_cf(cf(&self.db, CF_BLOCKS)?, block_key(b));
        Ok(())
    }

    /// Committed blocks of a container from `start_local_id`, at most `limit`.
    pub fn blocks(
        &self,
        cid: u64,
        start_local_id: u64,
        limit: usize,
    ) -> Result<Vec<BlockData>, DnError> {
        let start = block_key(BlockId {
            container_id: cid,
            local_id: start_local_id,
        });
        let prefix = u64_key(cid);
        let mut out = Vec::new();
        let it = self.db.iterator_cf(
            cf(&self.db, CF_BLOCKS)?,
            IteratorMode::From(&start, Direction::Forward),
        );
        for item in it {
            let (k, v) = item?;
            if !k.starts_with(&prefix) || out.len() >= limit {
                break;
            }
            out.push(decode("block", &v)?);
        }
        Ok(out)
    }

    pub fn get_chunk(&self, b: BlockId, offset: u64) -> Result<Option<ChunkInfo>, DnError> {
        match self
            .db
            .get_cf(cf(&self.db, CF_CHUNKS)?, chunk_key(b, offset))?
        {
            Some(v) => Ok(Some(decode("chunk", &v)?)),
            None => Ok(None),
        }
    }

    /// Committed-chunk rows of a block not yet put (in offset order).
    pub fn chunk_rows(&self, b: BlockId) -> Result<Vec<ChunkInfo>, DnError> {
        let prefix = block_key(b);
        let mut out = Vec::new();
        let it = self.db.iterator_cf(
            cf(&self.db, CF_CHUNKS)?,
            IteratorMode::From(&prefix, Direction::Forward),
        );
        for item in it {
            let (k, v) = item?;
            if !k.starts_with(&prefix) {
                break;
            }
            out.push(decode("chunk", &v)?);
        }
        Ok(out)
    }

    pub fn put_chunk(
        &self,
        batch: &mut WriteBatch,
        b: BlockId,
        c: &ChunkInfo,
    ) -> Result<(), DnError> {
        batch.put_cf(cf(&self.db, CF_CHUNKS)?, chunk_key(b, c.offset), encode(c)?);
        Ok(())
    }

    /// Deletes the committed-chunk rows of a block (it was committed, or deleted).
    pub fn delete_chunks(&self, batch: &mut WriteBatch, b: BlockId) -> Result<(), DnError> {
        let h = cf(&self.db, CF_CHUNKS)?;
        batch.delete_range_cf(h, chunk_key(b, 0), chunk_key(b, u64::MAX));
        batch.delete_cf(h, chunk_key(b, u64::MAX));
        Ok(())
    }

    /// Deletes every block and chunk row of a container.
    pub fn delete_container_rows(&self, batch: &mut WriteBatch, cid: u64) -> Result<(), DnError> {
        let from = block_key(BlockId {
            container_id: cid,
            local_id: 0,
        });
        let mut to = u64_key(cid.saturating_add(1)).to_vec();
        to.extend_from_slice(&[0u8; 8]);
        batch.delete_range_cf(cf(&self.db, CF_BLOCKS)?, &from, &to);
        let mut cfrom = from.clone();
        cfrom.extend_from_slice(&[0u8; 8]);
        let mut cto = to.clone();
        cto.extend_from_slice(&[0u8; 8]);
        batch.delete_range_cf(cf(&self.db, CF_CHUNKS)?, &cfrom, &cto);
        Ok(())
    }
}

/// Fsyncs a directory whose entries changed (a file or directory created, renamed in or
/// out), so the change survives power loss: `rozone_raft::sync_dir`, the one "fsync dir".
pub fn sync_dir(p: &Path) -> Result<(), DnError> {
    rozone_raft::sync_dir(p).map_err(|e| DnError::io(&format!("fsync {}", p.display()), e))
}

/// Removes a file or directory tree, ignoring "not found".
pub fn remove(p: &Path) {
    let r = if p.is_dir() {
        std::fs::remove_dir_all(p)
    } else {
        std::fs::remove_file(p)
    };
    if let Err(e) = r {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(path = %p.display(), error = %e, "remove");
        }
    }
}
