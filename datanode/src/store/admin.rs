//! Changes SCM commands make to a replica outside the pipeline log: delete a container
//! (leaving a tombstone), delete blocks, close without the pipeline (QUASI_CLOSED), and
//! import a replicated container.

use std::path::Path;

use rozone_kv::rocksdb::WriteBatch;
use rozone_types::codes::DnCode;

use super::{lock, volume, ContainerStore};
use crate::error::DnError;
use crate::types::{BlockData, ContainerState, Descriptor};

impl ContainerStore {
    /// Deletes a replica: only when it holds no blocks, unless forced; an OPEN container
    /// only when forced. The descriptor stays as a DELETED tombstone.
    pub fn delete_container(&self, cid: u64, force: bool) -> Result<(), DnError> {
        let (vi, d) = self.live(cid)?;
        if !force && d.block_count > 0 {
            return Err(DnError::new(
                DnCode::ContainerNotEmpty,
                format!(
                    "container {cid} holds {} blocks; delete with force",
                    d.block_count
                ),
            ));
        }
        if !force && d.state == ContainerState::Open {
            return Err(DnError::new(
                DnCode::ClosedContainerIo,
                format!("container {cid} is OPEN; delete with force"),
            ));
        }
        let v = &self.volumes[vi];
        let mut g = lock(&self.meta);
        let mut batch = WriteBatch::default();
        v.delete_container_rows(&mut batch, cid)?;
        let mut tomb = d;
        tomb.state = ContainerState::Deleted;
        tomb.block_count = 0;
        tomb.used_bytes = 0;
        tomb.digest = Default::default();
        self.commit(&mut g, vi, batch, tomb)?;
        drop(g);
        // Files go after the tombstone is durable: a crash in between leaves an orphan
        // directory, removed at the next start. The removal is made durable too (a
        // failure only means the next start removes the directory again).
        let dir = v.container_dir(cid);
        volume::remove(&dir);
        if self.sync {
            if let Err(e) = dir.parent().map_or(Ok(()), volume::sync_dir) {
                tracing::warn!(container_id = cid, error = %e, "container directory removal not yet durable");
            }
        }
        tracing::info!(
            container_id = cid,
            force,
            "container deleted (tombstone kept)"
        );
        Ok(())
    }

    /// Deletes blocks of a container (SCM's deleted-block transactions). Unknown blocks are
    /// already gone; returns how many were deleted.
    pub fn delete_blocks(&self, cid: u64, local_ids: &[u64]) -> Result<usize, DnError> {
        let (vi, _) = self.live(cid)?;
        let v = &self.volumes[vi];
        let mut g = lock(&self.meta);
        let Some((_, mut d)) = g.get(&cid).cloned() else {
            return Err(DnError::container_not_found(cid));
        };
        let mut batch = WriteBatch::default();
        let mut removed = Vec::new();
        for &lid in local_ids {
            let id = rozone_types::BlockId {
                container_id: cid,
                local_id: lid,
            };
            if let Some(b) = v.get_block(id)? {
                v.delete_block(&mut batch, id)?;
                v.delete_chunks(&mut batch, id)?;
                d.digest.remove(&b);
                d.block_count = d.block_count.saturating_sub(1);
                d.used_bytes = d.used_bytes.saturating_sub(b.length);
                removed.push(id);
            }
        }
        if removed.is_empty() {
            return Ok(0);
        }
        if matches!(
            d.state,
            ContainerState::Closed | ContainerState::QuasiClosed
        ) {
            let mut blocks = v.blocks(cid, 0, usize::MAX)?;
            blocks.retain(|b| !removed.contains(&b.id));
            d.checksum = super::container_checksum(&blocks);
        }
        self.commit(&mut g, vi, batch, d)?;
        drop(g);
        for id in &removed {
            volume::remove(&v.block_file(*id));
        }
        Ok(removed.len())
    }

    /// Closes a replica without the pipeline (its pipeline is gone here): an OPEN or
    /// CLOSING one becomes QUASI_CLOSED, its BCSID what this replica applied (the SCM
    /// compares it with the others'). With `force` (the SCM chose this replica as one at
    /// the highest BCSID a majority reached) a QUASI_CLOSED one becomes CLOSED; an OPEN or
    /// CLOSING one is still only quasi-closed, as it has not been compared yet.
    pub fn close_locally(&self, cid: u64, force: bool) -> Result<(), DnError> {
        let (vi, _) = self.live(cid)?;
        let mut g = lock(&self.meta);
        // Read again under the lock (a block deletion may have run since), and the blocks
        // too, so the checksum is of what the descriptor counts.
        let blocks = self.volumes[vi].blocks(cid, 0, usize::MAX)?;
        let Some((_, mut d)) = g.get(&cid).cloned() else {
            return Err(DnError::container_not_found(cid));
        };
        d.state = match d.state {
            ContainerState::Open | ContainerState::Closing => ContainerState::QuasiClosed,
            ContainerState::QuasiClosed if force => ContainerState::Closed,
            _ => return Ok(()),
        };
        d.checksum = super::container_checksum(&blocks);
        tracing::info!(
            container_id = cid,
            bcsid = d.bcsid,
            blocks = d.block_count,
            state = ?d.state,
            "container closed without its pipeline"
        );
        self.commit(&mut g, vi, WriteBatch::default(), d)
    }

    /// Marks an OPEN replica CLOSING (SCM asked to close it; the pipeline commits the close).
    pub fn mark_closing(&self, cid: u64) -> Result<(), DnError> {
        let (vi, d) = self.live(cid)?;
        if d.state != ContainerState::Open {
            return Ok(());
        }
        let mut g = lock(&self.meta);
        let mut d = d;
        d.state = ContainerState::Closing;
        self.commit(&mut g, vi, WriteBatch::default(), d)
    }

    /// Installs a verified, staged replica: the staged directory is renamed into place,
    /// then the descriptor and blocks are written in one batch. A crash between leaves a
    /// directory without descriptor, removed at the next start: never a partial container.
    pub fn import(
        &self,
        vi: usize,
        staged: &Path,
        mut d: Descriptor,
        blocks: &[BlockData],
    ) -> Result<(), DnError> {
        let cid = d.id;
        d.digest = super::digest::ContentDigest::of(blocks);
        let v = &self.volumes[vi];
        let mut g = lock(&self.meta);
        if let Some((ovi, old)) = g.get(&cid) {
            // A replica on a failed volume is lost: a new copy may take its place.
            if old.state != ContainerState::Deleted && !self.volumes[*ovi].is_failed() {
                return Err(DnError::invalid(format!(
                    "container {cid} already exists here ({:?})",
                    old.state
                )));
            }
        }
        let dest = v.container_dir(cid);
        volume::remove(&dest);
        if self.sync {
            // The staged files were synced one by one; their names are durable once the
            // staged directories are, before the rename that installs them.
            volume::sync_dir(&staged.join("chunks"))?;
            volume::sync_dir(staged)?;
        }
        std::fs::rename(staged, &dest)
            .map_err(|e| DnError::io(&format!("install {}", dest.display()), e))?;
        if self.sync {
            // The rename is durable before the descriptor that makes the replica live is
            // written (and the import acknowledged). If not, the directory goes: no replica.
            if let Err(e) = dest.parent().map_or(Ok(()), volume::sync_dir) {
                volume::remove(&dest);
                return Err(e);
            }
        }
        let mut batch = WriteBatch::default();
        if let Some((ovi, _)) = g.get(&cid).cloned() {
            if ovi != vi && !self.volumes[ovi].is_failed() {
                // The tombstone lives on another volume: it moves with the replica.
                let mut b = WriteBatch::default();
                self.volumes[ovi].delete_container_rows(&mut b, cid)?;
                self.volumes[ovi].write(b, self.sync)?;
            }
        }
        v.delete_container_rows(&mut batch, cid)?;
        for b in blocks {
            v.put_block(&mut batch, b)?;
        }
        self.commit(&mut g, vi, batch, d)?;
        Ok(())
    }
}
