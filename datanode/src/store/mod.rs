//! The container store: every container replica on this datanode.
//!
//! One RocksDB per data directory (as Ozone's schema v3), keyed by container id: the
//! descriptor (state, BCSID, block count, used bytes, checksum), committed blocks and
//! committed chunks not yet part of a block. Chunk bytes live in files, one per block
//! (`<volume>/containers/<cid>/chunks/<local id>.block`, a block's chunks at their offsets).
//!
//! Only the write stage ([`write`]) may create a container (OPEN). The apply stage
//! ([`apply`]) never does: an entry for a missing container is `CONTAINER_NOT_FOUND`.
//! A deleted container keeps its descriptor as a tombstone (state DELETED), so neither a
//! replayed entry nor a re-sent write can resurrect it.

pub mod admin;
pub mod apply;
pub mod check;
pub mod digest;
pub mod faults;
pub mod read;
pub mod volume;
pub mod write;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rozone_kv::rocksdb::WriteBatch;
use rozone_types::BlockId;

use crate::error::DnError;
use crate::types::{BlockData, ContainerState, Descriptor};
pub use volume::Volume;

/// A (block, offset, len, first checksum) the write stage stored in this process.
type RecentKey = (BlockId, u64, u64, u32);

/// How many recent writes are remembered (an optimisation only: a miss re-reads the file).
const RECENT_MAX: usize = 50_000;

pub struct ContainerStore {
    volumes: Vec<Volume>,
    /// Every descriptor (tombstones too) and the volume holding it. Also serialises
    /// descriptor read-modify-write.
    meta: Mutex<HashMap<u64, (usize, Descriptor)>>,
    /// Containers whose descriptor changed since the last incremental report.
    changed: Mutex<BTreeSet<u64>>,
    recent: Mutex<HashSet<RecentKey>>,
    /// fsync chunk files and metadata writes.
    sync: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs blocking store work (file and database I/O) off the async workers; a worker that
/// dies is [`DnError::worker`].
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, DnError> + Send + 'static,
) -> Result<T, DnError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(DnError::worker)?
}

/// Runs blocking work (file, fsync, database I/O) from code that cannot hand it to
/// [`blocking`] — a synchronous trait method such as the Raft apply, or a value it cannot
/// move — without blocking an async worker: on a multi-threaded runtime the worker first
/// hands its other tasks to another thread (`block_in_place`), so a slow disk stalls only
/// the task that waits for it, never heartbeats, Raft or other requests. Outside such a
/// runtime (blocking threads, unit tests) it simply runs `f`.
pub fn offload<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

impl ContainerStore {
    /// Opens (creating) every volume and loads its descriptors. Leftovers of interrupted
    /// writes and imports are removed; a container whose files are damaged is marked
    /// UNHEALTHY.
    pub fn open(dirs: &[PathBuf], capacity: u64, sync: bool) -> Result<Self, DnError> {
        let mut volumes = Vec::new();
        let mut meta: HashMap<u64, (usize, Descriptor)> = HashMap::new();
        for (vi, dir) in dirs.iter().enumerate() {
            let v = Volume::open(dir, capacity)?;
            for d in v.load_descriptors()? {
                if let Some((other, prev)) = meta.get(&d.id) {
                    // A live replica wins over a tombstone left on another volume.
                    if d.state == ContainerState::Deleted || prev.state != ContainerState::Deleted {
                        if d.state != ContainerState::Deleted {
                            tracing::warn!(container_id = d.id, volume = %dir.display(), other, "container on two volumes; keeping the first");
                        }
                        continue;
                    }
                }
                meta.insert(d.id, (vi, d));
            }
            v.cleanup_orphans(|cid| {
                meta.get(&cid)
                    .is_some_and(|(i, d)| *i == vi && d.state != ContainerState::Deleted)
            })?;
            volumes.push(v);
        }
        let store = Self {
            volumes,
            meta: Mutex::new(meta),
            changed: Mutex::new(BTreeSet::new()),
            recent: Mutex::new(HashSet::new()),
            sync,
        };
        store.check_damage()?;
        store.recount_used();
        Ok(store)
    }

    /// Marks UNHEALTHY every live container whose directory or block files are missing or
    /// shorter than their committed blocks, or whose block table disagrees with its block
    /// count and content digest.
    fn check_damage(&self) -> Result<(), DnError> {
        let live: Vec<(usize, Descriptor)> = lock(&self.meta)
            .values()
            .filter(|(_, d)| {
                !matches!(d.state, ContainerState::Deleted | ContainerState::Unhealthy)
            })
            .cloned()
            .collect();
        for (vi, d) in live {
            let v = &self.volumes[vi];
            let problem = if !v.container_dir(d.id).is_dir() {
                Some("container directory is missing".to_string())
            } else {
                let blocks = v.blocks(d.id, 0, usize::MAX)?;
                let held = digest::ContentDigest::of(&blocks);
                if held != d.digest || held.block_count != d.block_count {
                    Some(format!(
                        "its block table holds {} blocks (digest {:016x}); its descriptor says {} (digest {:016x})",
                        held.block_count, held.sum, d.block_count, d.digest.sum
                    ))
                } else {
                    blocks.into_iter().find_map(|b| {
                        let p = v.block_file(b.id);
                        match std::fs::metadata(&p) {
                            Ok(m) if m.len() >= b.length => None,
                            Ok(m) => Some(format!(
                                "{} holds {} bytes, block {} needs {}",
                                p.display(),
                                m.len(),
                                b.id,
                                b.length
                            )),
                            Err(e) => Some(format!("{}: {e}", p.display())),
                        }
                    })
                }
            };
            if let Some(why) = problem {
                self.mark_unhealthy(d.id, &why)?;
            }
        }
        Ok(())
    }

    fn recount_used(&self) {
        let meta = lock(&self.meta);
        for (vi, v) in self.volumes.iter().enumerate() {
            let used = meta
                .values()
                .filter(|(i, d)| *i == vi && d.state != ContainerState::Deleted)
                .map(|(_, d)| d.used_bytes)
                .sum();
            v.set_used(used);
        }
    }

    pub fn volumes(&self) -> &[Volume] {
        &self.volumes
    }

    /// The descriptor of a container (tombstones included).
    pub fn descriptor(&self, cid: u64) -> Option<Descriptor> {
        lock(&self.meta).get(&cid).map(|(_, d)| d.clone())
    }

    /// The live replica (not deleted), with its volume index. A replica on a failed volume
    /// is not served: `IO_ERROR` naming the volume.
    pub fn live(&self, cid: u64) -> Result<(usize, Descriptor), DnError> {
        match lock(&self.meta).get(&cid) {
            Some((vi, d)) if d.state != ContainerState::Deleted => {
                let v = &self.volumes[*vi];
                match v.failed() {
                    None => Ok((*vi, d.clone())),
                    Some(why) => Err(DnError::io(
                        &format!("container {cid} is on failed volume {}", v.root().display()),
                        why,
                    )),
                }
            }
            _ => Err(DnError::container_not_found(cid)),
        }
    }

    /// Every descriptor except tombstones and replicas on failed volumes (lost: the SCM
    /// re-replicates them).
    pub fn descriptors(&self) -> Vec<Descriptor> {
        let mut v: Vec<Descriptor> = lock(&self.meta)
            .values()
            .filter(|(vi, d)| d.state != ContainerState::Deleted && !self.volumes[*vi].is_failed())
            .map(|(_, d)| d.clone())
            .collect();
        v.sort_by_key(|d| d.id);
        v
    }

    /// Descriptors changed since the last call (tombstones report the deletion). Every
    /// replica of a volume that failed since is reported deleted, once: it is lost.
    pub fn take_changed(&self) -> Vec<Descriptor> {
        let failed: Vec<usize> = (0..self.volumes.len())
            .filter(|&vi| self.volumes[vi].take_newly_failed())
            .collect();
        let mut ids = std::mem::take(&mut *lock(&self.changed));
        let meta = lock(&self.meta);
        ids.extend(
            meta.iter()
                .filter(|(_, (vi, _))| failed.contains(vi))
                .map(|(id, _)| *id),
        );
        ids.into_iter()
            .filter_map(|id| meta.get(&id))
            .map(|(vi, d)| {
                let mut d = d.clone();
                if self.volumes[*vi].is_failed() {
                    d.state = ContainerState::Deleted;
                }
                d
            })
            .collect()
    }

    /// Puts changed containers back for the next incremental report (a heartbeat failed).
    pub fn requeue_changed(&self, ids: impl IntoIterator<Item = u64>) {
        lock(&self.changed).extend(ids);
    }

    pub fn volume_of(&self, cid: u64) -> Option<&Volume> {
        lock(&self.meta).get(&cid).map(|(vi, _)| &self.volumes[*vi])
    }

    /// Writes `batch` plus the new descriptor, then publishes the descriptor. The caller
    /// holds the meta lock (`guard`).
    fn commit(
        &self,
        guard: &mut MutexGuard<'_, HashMap<u64, (usize, Descriptor)>>,
        vi: usize,
        mut batch: WriteBatch,
        d: Descriptor,
    ) -> Result<(), DnError> {
        let v = &self.volumes[vi];
        v.put_descriptor(&mut batch, &d)?;
        v.write(batch, self.sync)?;
        let old_used = guard.get(&d.id).map(|(_, o)| o.used_bytes).unwrap_or(0);
        let new_used = if d.state == ContainerState::Deleted {
            0
        } else {
            d.used_bytes
        };
        v.adjust_used(old_used, new_used);
        lock(&self.changed).insert(d.id);
        guard.insert(d.id, (vi, d));
        Ok(())
    }

    /// A member of `pipeline` caught up by installing a snapshot at `to` after applying up to
    /// `from`: the entries between never ran here, so every container of that pipeline still
    /// taking writes (OPEN or CLOSING) may lack blocks. Each is marked UNHEALTHY (needs
    /// repair: never served, never closed with a BCSID it does not hold, re-replicated by
    /// the SCM). Returns the containers marked.
    pub fn mark_skipped_by_snapshot(
        &self,
        pipeline: u64,
        from: u64,
        to: u64,
    ) -> Result<Vec<u64>, DnError> {
        let affected: Vec<u64> = lock(&self.meta)
            .values()
            .filter(|(_, d)| {
                d.origin_pipeline == pipeline
                    && matches!(d.state, ContainerState::Open | ContainerState::Closing)
            })
            .map(|(_, d)| d.id)
            .collect();
        let why = format!(
            "pipeline {pipeline} caught up by snapshot: entries {}..={to} were never applied here",
            from.saturating_add(1)
        );
        for cid in &affected {
            self.mark_unhealthy(*cid, &why)?;
        }
        Ok(affected)
    }

    /// Marks a container UNHEALTHY (damaged files, missing data): never served again.
    pub fn mark_unhealthy(&self, cid: u64, why: &str) -> Result<(), DnError> {
        let mut g = lock(&self.meta);
        let Some((vi, d)) = g.get(&cid).cloned() else {
            return Ok(());
        };
        if matches!(d.state, ContainerState::Deleted | ContainerState::Unhealthy)
            || self.volumes[vi].is_failed()
        {
            // A failed volume's replicas are lost already (and its DB takes no writes).
            return Ok(());
        }
        tracing::error!(
            container_id = cid,
            reason = why,
            "container replica marked UNHEALTHY"
        );
        let mut d = d;
        d.state = ContainerState::Unhealthy;
        self.commit(&mut g, vi, WriteBatch::default(), d)
    }

    fn remember(&self, block: BlockId, offset: u64, len: u64, first: u32) {
        let mut r = lock(&self.recent);
        if r.len() >= RECENT_MAX {
            r.clear();
        }
        r.insert((block, offset, len, first));
    }

    fn recently_written(&self, block: BlockId, offset: u64, len: u64, first: u32) -> bool {
        lock(&self.recent).contains(&(block, offset, len, first))
    }

    /// Committed blocks of a container in local-id order.
    pub fn blocks(&self, cid: u64) -> Result<Vec<BlockData>, DnError> {
        let (vi, _) = self.live(cid)?;
        self.volumes[vi].blocks(cid, 0, usize::MAX)
    }

    /// Directory of a container's files (live replicas only).
    pub fn container_dir(&self, cid: u64) -> Result<PathBuf, DnError> {
        let (vi, _) = self.live(cid)?;
        Ok(self.volumes[vi].container_dir(cid))
    }

    /// Root of a volume by index.
    pub fn volume_root(&self, vi: usize) -> &Path {
        self.volumes[vi].root()
    }
}

/// The container checksum: CRC32C over every committed block's id, length, bcsid and chunk
/// checksums, in local-id order (hex).
pub fn container_checksum(blocks: &[BlockData]) -> String {
    let mut crc = 0u32;
    for b in blocks {
        let mut buf = Vec::with_capacity(32 + b.chunks.len() * 24);
        buf.extend_from_slice(&b.id.local_id.to_be_bytes());
        buf.extend_from_slice(&b.length.to_be_bytes());
        buf.extend_from_slice(&b.bcsid.to_be_bytes());
        for c in &b.chunks {
            buf.extend_from_slice(&c.offset.to_be_bytes());
            buf.extend_from_slice(&c.len.to_be_bytes());
            for v in &c.checksum.values {
                buf.extend_from_slice(&v.to_be_bytes());
            }
        }
        crc = rozone_types::checksum::crc32c_append(crc, &buf);
    }
    format!("{crc:08x}-{}", blocks.len())
}
