//! The write stage: chunk bytes reach the container's block file before the log entry that
//! commits them is appended. Only here may a container be created (OPEN) — never for a
//! tombstone, never for a container that is not OPEN.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use rozone_kv::rocksdb::WriteBatch;
use rozone_types::codes::DnCode;
use rozone_types::BlockId;

use super::faults;
use super::volume::{self, sync_dir};
use super::{lock, ContainerStore};
use crate::error::DnError;
use crate::types::{block_range_end, ChunkInfo, ContainerState, Descriptor};

impl ContainerStore {
    /// The volume a write for `cid` goes to: the container's, or the one with most room
    /// for a new container.
    /// A failed volume takes nothing; a full one no new container.
    pub fn volume_for_write(&self, cid: u64, need: u64) -> Result<usize, DnError> {
        if let Some((vi, d)) = lock(&self.meta).get(&cid) {
            check_writable(d)?;
            self.check_volume(*vi)?;
            return Ok(*vi);
        }
        self.check_any_volume()?;
        self.volumes
            .iter()
            .enumerate()
            .filter(|(_, v)| v.accepts_data())
            .map(|(i, v)| (i, v.space().2))
            .filter(|(_, free)| *free >= need)
            .max_by_key(|(_, free)| *free)
            .map(|(i, _)| i)
            .ok_or_else(|| {
                DnError::new(
                    DnCode::DiskFull,
                    format!("no data directory has {need} bytes free for container {cid}"),
                )
            })
    }

    /// The volume with most room, for an imported replica (never a failed or full one).
    pub fn volume_for_import(&self) -> Result<usize, DnError> {
        self.check_any_volume()?;
        self.volumes
            .iter()
            .enumerate()
            .filter(|(_, v)| v.accepts_data())
            .max_by_key(|(_, v)| v.space().2)
            .map(|(i, _)| i)
            .ok_or_else(|| {
                DnError::new(DnCode::DiskFull, "disk full: every data directory is full")
            })
    }

    /// `IO_ERROR` when volume `vi` failed.
    fn check_volume(&self, vi: usize) -> Result<(), DnError> {
        let v = &self.volumes[vi];
        match v.failed() {
            Some(why) => Err(DnError::io(
                &format!("volume {} failed", v.root().display()),
                why,
            )),
            None => Ok(()),
        }
    }

    /// `IO_ERROR` when every volume failed.
    fn check_any_volume(&self) -> Result<(), DnError> {
        if !self.volumes.is_empty() && self.volumes.iter().all(|v| v.is_failed()) {
            return Err(DnError::new(
                DnCode::IoError,
                "every data directory of this datanode failed",
            ));
        }
        Ok(())
    }

    /// Returns the OPEN container's volume, creating the container when it never existed
    /// here. `preferred` is the volume data was staged on.
    pub fn ensure_open(
        &self,
        cid: u64,
        pipeline: u64,
        need: u64,
        preferred: Option<usize>,
    ) -> Result<usize, DnError> {
        let mut g = lock(&self.meta);
        if let Some((vi, d)) = g.get(&cid) {
            check_writable(d)?;
            self.check_volume(*vi)?;
            return Ok(*vi);
        }
        drop(g);
        let vi = match preferred {
            Some(v) => v,
            None => self.volume_for_write(cid, need)?,
        };
        g = lock(&self.meta);
        if let Some((vi, d)) = g.get(&cid) {
            check_writable(d)?;
            return Ok(*vi);
        }
        let v = &self.volumes[vi];
        let cdir = v.container_dir(cid);
        let dir = cdir.join("chunks");
        v.injected()
            .and_then(|()| std::fs::create_dir_all(&dir))
            .map_err(|e| v.fault(&format!("create {}", dir.display()), e))?;
        if self.sync {
            // Both new entries (`<cid>` in `containers/`, `chunks` in `<cid>`) are durable
            // before the descriptor is written; if not, no container: the directory goes.
            let synced = sync_dir(&cdir).and_then(|()| match cdir.parent() {
                Some(p) => sync_dir(p),
                None => Ok(()),
            });
            if let Err(e) = synced {
                volume::remove(&cdir);
                return Err(e);
            }
        }
        tracing::info!(
            container_id = cid,
            pipeline_id = pipeline,
            "container created (OPEN) by the write stage"
        );
        self.commit(
            &mut g,
            vi,
            WriteBatch::default(),
            Descriptor::new_open(cid, pipeline),
        )?;
        Ok(vi)
    }

    /// Write stage of a WriteChunk: verifies the bytes against the chunk's checksums (a
    /// mismatch stores nothing), then writes them at the chunk's offset.
    pub fn write_chunk(
        &self,
        pipeline: u64,
        block: BlockId,
        chunk: &ChunkInfo,
        data: &[u8],
    ) -> Result<(), DnError> {
        if data.len() as u64 != chunk.len {
            return Err(DnError::invalid(format!(
                "chunk at offset {} of block {block} declares {} bytes but carries {}",
                chunk.offset,
                chunk.len,
                data.len()
            )));
        }
        verify(block, chunk, data)?;
        let vi = self.ensure_open(block.container_id, pipeline, chunk.len, None)?;
        let committed = self.committed_ranges(vi, block)?;
        if committed.iter().any(|c| c == chunk) {
            // A retry of a committed chunk: its bytes are the same, nothing to write.
            return Ok(());
        }
        if let Some(c) = committed
            .iter()
            .find(|c| c.offset < chunk.end() && chunk.offset < c.end())
        {
            return Err(overwrite(block, chunk, c));
        }
        let v = &self.volumes[vi];
        let path = v.block_file(block);
        let fresh = !path.exists();
        let f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| v.fault(&format!("open {}", path.display()), e))?;
        v.injected()
            .and_then(|()| f.write_all_at(data, chunk.offset))
            .map_err(|e| v.fault(&format!("write {}", path.display()), e))?;
        if self.sync {
            f.sync_data()
                .map_err(|e| v.fault(&format!("sync {}", path.display()), e))?;
            if fresh {
                // A new block file: its name is durable before the write is acknowledged.
                // If not, the file goes, so a retry creates (and syncs) it again.
                if let Err(e) = path.parent().map_or(Ok(()), sync_dir) {
                    drop(f);
                    volume::remove(&path);
                    return Err(e);
                }
            }
        }
        v.wrote();
        self.remember(block, chunk.offset, chunk.len, first(chunk));
        Ok(())
    }

    /// Starts staging a streamed block: a temp file on the volume the container lives on
    /// (or would be created on). Refuses at once for tombstones and non-OPEN containers.
    pub fn stage_stream(&self, block: BlockId) -> Result<StagedFile, DnError> {
        let vi = self.volume_for_write(block.container_id, 0)?;
        let v = &self.volumes[vi];
        let path = v.tmp_path(&format!("stream-{}-{}", block.container_id, block.local_id));
        let file = v
            .injected()
            .and_then(|()| std::fs::File::create(&path))
            .map_err(|e| v.fault(&format!("create {}", path.display()), e))?;
        Ok(StagedFile {
            volume: vi,
            path,
            file: Some(file),
            installed: false,
        })
    }

    /// Write stage of a stream: the staged bytes (already checked against `chunk`) become the
    /// block's file; the container is created OPEN if it never existed here.
    pub fn install_stream(
        &self,
        pipeline: u64,
        block: BlockId,
        chunk: &ChunkInfo,
        mut staged: StagedFile,
    ) -> Result<(), DnError> {
        let f = staged
            .file
            .take()
            .ok_or_else(|| DnError::io("stream", "staged file already used"))?;
        let len = f
            .metadata()
            .map_err(|e| DnError::io("stat staged stream", e))?
            .len();
        if len != chunk.len {
            return Err(DnError::invalid(format!(
                "stream of block {block} staged {len} bytes, declared {}",
                chunk.len
            )));
        }
        if self.sync {
            let v = &self.volumes[staged.volume];
            f.sync_data()
                .map_err(|e| v.fault("sync staged stream", e))?;
        }
        drop(f);
        let vi = self.ensure_open(block.container_id, pipeline, chunk.len, Some(staged.volume))?;
        // The staged file replaces the whole block file: only a block with nothing committed
        // may take it (or the very same stream again, which changes nothing).
        let committed = self.committed_ranges(vi, block)?;
        if committed.len() == 1 && committed[0] == *chunk {
            return Ok(());
        }
        if let Some(c) = committed.first() {
            return Err(overwrite(block, chunk, c));
        }
        let v = &self.volumes[vi];
        let dest = v.block_file(block);
        std::fs::rename(&staged.path, &dest)
            .map_err(|e| v.fault(&format!("install {}", dest.display()), e))?;
        staged.installed = true;
        if self.sync {
            // The rename is durable before the stream is acknowledged; if not, the block
            // file goes (nothing was committed in it: checked above).
            if let Err(e) = dest.parent().map_or(Ok(()), sync_dir) {
                volume::remove(&dest);
                return Err(e);
            }
        }
        v.wrote();
        self.remember(block, 0, chunk.len, first(chunk));
        Ok(())
    }

    /// Whether this replica holds the chunk's bytes intact (the write stage ran here).
    pub fn has_chunk(&self, block: BlockId, chunk: &ChunkInfo) -> bool {
        if self.recently_written(block, chunk.offset, chunk.len, first(chunk)) {
            return true;
        }
        match self.read_raw(block, chunk.offset, chunk.len) {
            Ok(data) => verify(block, chunk, &data).is_ok(),
            Err(_) => false,
        }
    }

    /// Chunks of a block committed on this replica: its block record's, or the chunk rows of
    /// a block not yet put. Their bytes are immutable.
    fn committed_ranges(&self, vi: usize, block: BlockId) -> Result<Vec<ChunkInfo>, DnError> {
        let v = &self.volumes[vi];
        let mut out = v.get_block(block)?.map(|b| b.chunks).unwrap_or_default();
        out.extend(v.chunk_rows(block)?);
        Ok(out)
    }

    /// Bytes of a block file as written (committed or not), for peers pulling them.
    pub fn read_raw(&self, block: BlockId, offset: u64, len: u64) -> Result<Vec<u8>, DnError> {
        let end = block_range_end(&format!("block {block}"), offset, len)?;
        let (vi, _) = self.live(block.container_id)?;
        let path = self.volumes[vi].block_file(block);
        let f = std::fs::File::open(&path)
            .map_err(|e| DnError::new(DnCode::NoSuchBlock, format!("block {block}: {e}")))?;
        let mut buf = vec![0u8; len as usize];
        f.read_exact_at(&mut buf, offset).map_err(|e| {
            DnError::new(
                DnCode::OutOfRange,
                format!("block {block}: bytes [{offset}, {end}) not present: {e}"),
            )
        })?;
        Ok(buf)
    }
}

/// A streamed block being staged; removed if dropped before install.
pub struct StagedFile {
    volume: usize,
    path: PathBuf,
    file: Option<std::fs::File>,
    /// Renamed into place: nothing to remove.
    installed: bool,
}

impl StagedFile {
    pub fn append(&mut self, data: &[u8]) -> Result<(), DnError> {
        match &mut self.file {
            // Classified for its code (ENOSPC is DISK_FULL); the volume's state follows at
            // the next chunk write or sync on it.
            Some(f) => f.write_all(data).map_err(|e| match faults::classify(&e) {
                faults::Fault::Full => DnError::new(
                    DnCode::DiskFull,
                    format!("disk full: write staged stream: {e}"),
                ),
                _ => DnError::io("write staged stream", e),
            }),
            None => Err(DnError::io("stream", "staged file already used")),
        }
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        if !self.installed {
            volume::remove(&self.path);
        }
    }
}

/// The refusal of a write over committed bytes.
fn overwrite(block: BlockId, chunk: &ChunkInfo, committed: &ChunkInfo) -> DnError {
    DnError::invalid(format!(
        "block {block}: [{}, {}) would overwrite committed bytes [{}, {}); committed bytes are immutable",
        chunk.offset,
        chunk.end(),
        committed.offset,
        committed.end()
    ))
}

fn first(c: &ChunkInfo) -> u32 {
    c.checksum.values.first().copied().unwrap_or(0)
}

/// Checks bytes against a chunk's checksums.
pub fn verify(block: BlockId, chunk: &ChunkInfo, data: &[u8]) -> Result<(), DnError> {
    chunk.checksum.verify(data).map_err(|m| {
        DnError::new(
            DnCode::ChecksumMismatch,
            format!(
                "block {block}, chunk at offset {}: byte {} of the chunk: {}",
                chunk.offset, m.at, m.reason
            ),
        )
    })
}

fn check_writable(d: &Descriptor) -> Result<(), DnError> {
    match d.state {
        ContainerState::Open => Ok(()),
        ContainerState::Deleted => Err(DnError::container_not_found(d.id)),
        ContainerState::Unhealthy => Err(DnError::new(
            DnCode::ContainerUnhealthy,
            format!("container {} is UNHEALTHY", d.id),
        )),
        s => Err(DnError::new(
            DnCode::ClosedContainerIo,
            format!("container {} is {s:?}: no more writes", d.id),
        )),
    }
}
