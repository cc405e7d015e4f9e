//! The apply stage: commits what the pipeline's log says into the container store and
//! advances the container's BCSID. It NEVER creates a container: an entry for a container
//! that does not exist here (never created, or deleted: a tombstone) is
//! `CONTAINER_NOT_FOUND`. Entries at or below the container's BCSID were applied already
//! and are skipped, so a replay after a crash changes nothing.

use rozone_kv::rocksdb::WriteBatch;
use rozone_types::codes::DnCode;
use rozone_types::BlockId;

use super::{lock, ContainerStore};
use crate::error::DnError;
use crate::types::{BlockData, ChunkInfo, ContainerState, Descriptor};

/// What applying an entry did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Committed now; the container's BCSID is the entry's index.
    Done { bcsid: u64, length: u64 },
    /// The container's BCSID already covers the entry.
    AlreadyApplied { bcsid: u64 },
}

impl Applied {
    pub fn bcsid(&self) -> u64 {
        match self {
            Applied::Done { bcsid, .. } | Applied::AlreadyApplied { bcsid } => *bcsid,
        }
    }
}

enum Start {
    Skip(u64),
    Go(usize, Descriptor),
}

impl ContainerStore {
    fn start_apply(&self, index: u64, cid: u64) -> Result<Start, DnError> {
        let (vi, d) = self.live(cid)?;
        if index <= d.bcsid {
            return Ok(Start::Skip(d.bcsid));
        }
        if d.state == ContainerState::Unhealthy {
            return Err(DnError::new(
                DnCode::ContainerUnhealthy,
                format!("container {cid} is UNHEALTHY"),
            ));
        }
        Ok(Start::Go(vi, d))
    }

    fn require_open(d: &Descriptor) -> Result<(), DnError> {
        if d.state != ContainerState::Open {
            return Err(DnError::new(
                DnCode::ClosedContainerIo,
                format!("container {} is {:?}: no more writes", d.id, d.state),
            ));
        }
        Ok(())
    }

    /// The chunk's bytes must be on disk and intact: the write stage ran before the entry
    /// was appended. If not, the replica cannot be trusted.
    fn require_data(&self, block: BlockId, chunk: &ChunkInfo) -> Result<(), DnError> {
        if self.has_chunk(block, chunk) {
            return Ok(());
        }
        let why = format!(
            "bytes [{}, {}) of block {block} are missing or damaged at apply",
            chunk.offset,
            chunk.end()
        );
        self.mark_unhealthy(block.container_id, &why)?;
        Err(DnError::new(DnCode::ChecksumMismatch, why))
    }

    /// Commits a written chunk (WriteChunk and StreamInit entries).
    pub fn apply_chunk(
        &self,
        index: u64,
        block: BlockId,
        chunk: &ChunkInfo,
    ) -> Result<Applied, DnError> {
        let cid = block.container_id;
        let (vi, _) = match self.start_apply(index, cid)? {
            Start::Skip(b) => return Ok(Applied::AlreadyApplied { bcsid: b }),
            Start::Go(vi, d) => {
                Self::require_open(&d)?;
                (vi, d)
            }
        };
        self.require_data(block, chunk)?;
        let v = &self.volumes[vi];
        let mut g = lock(&self.meta);
        let Some((_, mut d)) = g.get(&cid).cloned() else {
            return Err(DnError::container_not_found(cid));
        };
        let known = v
            .get_chunk(block, chunk.offset)?
            .is_some_and(|c| c.len == chunk.len)
            || v.get_block(block)?.is_some_and(|b| {
                b.chunks
                    .iter()
                    .any(|c| c.offset == chunk.offset && c.len == chunk.len)
            });
        let mut batch = WriteBatch::default();
        v.put_chunk(&mut batch, block, chunk)?;
        if !known {
            d.used_bytes += chunk.len;
        }
        d.bcsid = index;
        self.commit(&mut g, vi, batch, d)?;
        Ok(Applied::Done {
            bcsid: index,
            length: chunk.end(),
        })
    }

    /// Checks that every chunk of `block` was committed (or, for `streamed`, is the chunk
    /// the same entry commits). Read-only: the leader runs it before proposing, so a bad
    /// PutBlock is refused with nothing stored.
    pub fn check_block(
        &self,
        block: &BlockData,
        streamed: Option<&ChunkInfo>,
    ) -> Result<(), DnError> {
        crate::types::check_layout(block)?;
        let (vi, d) = self.live(block.id.container_id)?;
        Self::require_open(&d)?;
        let v = &self.volumes[vi];
        let existing = v.get_block(block.id)?;
        for c in &block.chunks {
            if streamed.is_some_and(|s| s == c) {
                continue;
            }
            let committed = v.get_chunk(block.id, c.offset)?.is_some_and(|k| &k == c)
                || existing
                    .as_ref()
                    .is_some_and(|b| b.chunks.iter().any(|k| k == c));
            if !committed {
                return Err(DnError::invalid(format!(
                    "block {}: chunk [{}, {}) was never written (or its checksums differ)",
                    block.id,
                    c.offset,
                    c.end()
                )));
            }
        }
        Ok(())
    }

    /// Commits a block (PutBlock, and stream-with-block with its streamed chunk).
    pub fn apply_block(
        &self,
        index: u64,
        block: &BlockData,
        streamed: Option<&ChunkInfo>,
    ) -> Result<Applied, DnError> {
        let cid = block.id.container_id;
        let vi = match self.start_apply(index, cid)? {
            Start::Skip(b) => return Ok(Applied::AlreadyApplied { bcsid: b }),
            Start::Go(vi, d) => {
                Self::require_open(&d)?;
                vi
            }
        };
        if let Err(e) = self.check_block(block, streamed) {
            // The leader checked the same block before proposing it: a well-formed block
            // naming chunks this replica never committed means this replica is short (it
            // skipped entries, e.g. it caught up by snapshot). Never a silent refusal.
            if e.code == DnCode::InvalidArgument && crate::types::check_layout(block).is_ok() {
                let why = format!(
                    "apply of block {} at index {index}: {}",
                    block.id, e.message
                );
                self.mark_unhealthy(cid, &why)?;
                return Err(DnError::new(DnCode::ContainerUnhealthy, why));
            }
            return Err(e);
        }
        if let Some(c) = streamed {
            self.require_data(block.id, c)?;
        }
        let v = &self.volumes[vi];
        let mut g = lock(&self.meta);
        let Some((_, mut d)) = g.get(&cid).cloned() else {
            return Err(DnError::container_not_found(cid));
        };
        let existing = v.get_block(block.id)?;
        let mut batch = WriteBatch::default();
        let mut stored = block.clone();
        stored.bcsid = index;
        v.put_block(&mut batch, &stored)?;
        v.delete_chunks(&mut batch, block.id)?;
        match &existing {
            Some(old) => d.digest.remove(old),
            None => d.block_count += 1,
        }
        d.digest.add(&stored);
        if let Some(c) = streamed {
            d.used_bytes += c.len;
        }
        d.bcsid = index;
        self.commit(&mut g, vi, batch, d)?;
        Ok(Applied::Done {
            bcsid: index,
            length: block.length,
        })
    }

    /// Closes a container through the pipeline: CLOSED, with its checksum.
    pub fn apply_close(&self, index: u64, cid: u64) -> Result<Applied, DnError> {
        let (vi, d) = match self.start_apply(index, cid)? {
            Start::Skip(b) => return Ok(Applied::AlreadyApplied { bcsid: b }),
            Start::Go(vi, d) => (vi, d),
        };
        if d.state == ContainerState::Closed {
            return Ok(Applied::AlreadyApplied { bcsid: d.bcsid });
        }
        let blocks = self.volumes[vi].blocks(cid, 0, usize::MAX)?;
        let mut g = lock(&self.meta);
        let Some((_, mut d)) = g.get(&cid).cloned() else {
            return Err(DnError::container_not_found(cid));
        };
        d.state = ContainerState::Closed;
        d.bcsid = index;
        d.checksum = super::container_checksum(&blocks);
        tracing::info!(
            container_id = cid,
            bcsid = index,
            blocks = d.block_count,
            "container CLOSED"
        );
        self.commit(&mut g, vi, WriteBatch::default(), d)?;
        Ok(Applied::Done {
            bcsid: index,
            length: 0,
        })
    }
}
