//! Reads of committed data from any replica, verified against the stored checksums. A
//! mismatch marks the replica UNHEALTHY: damaged data is never served.

use std::os::unix::fs::FileExt;

use rozone_types::codes::DnCode;
use rozone_types::BlockId;

use super::ContainerStore;
use crate::error::DnError;
use crate::types::{BlockData, ContainerState, MAX_CHUNK};

/// Bytes of one stored chunk, widened to whole checksum windows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub offset: u64,
    pub data: Vec<u8>,
    pub checksum: rozone_types::checksum::ChecksumData,
}

impl ContainerStore {
    fn readable(&self, cid: u64) -> Result<usize, DnError> {
        let (vi, d) = self.live(cid)?;
        if d.state == ContainerState::Unhealthy {
            return Err(DnError::new(
                DnCode::ContainerUnhealthy,
                format!("container {cid} is UNHEALTHY on this datanode; read another replica"),
            ));
        }
        Ok(vi)
    }

    /// A committed block.
    pub fn get_block(&self, id: BlockId) -> Result<BlockData, DnError> {
        let vi = self.readable(id.container_id)?;
        self.volumes[vi]
            .get_block(id)?
            .ok_or_else(|| DnError::new(DnCode::NoSuchBlock, format!("no committed block {id}")))
    }

    /// Committed blocks from `start`, at most `count`.
    pub fn list_blocks(
        &self,
        cid: u64,
        start: u64,
        count: usize,
    ) -> Result<Vec<BlockData>, DnError> {
        let vi = self.readable(cid)?;
        self.volumes[vi].blocks(cid, start, count)
    }

    /// Reads committed bytes `[offset, offset + len)` of a block (`len` 0: to the end, when
    /// that is at most [`MAX_CHUNK`] bytes: one reply never holds more, whatever the block).
    pub fn read(&self, id: BlockId, offset: u64, len: u64) -> Result<(Vec<Segment>, u64), DnError> {
        let b = self.get_block(id)?;
        let len = if len == 0 {
            b.length.saturating_sub(offset)
        } else {
            len
        };
        let end = offset.saturating_add(len);
        if offset >= b.length || end > b.length || len == 0 {
            return Err(DnError::new(
                DnCode::OutOfRange,
                format!(
                    "block {id} has {} committed bytes; [{offset}, {end}) is past the end",
                    b.length
                ),
            ));
        }
        if len > MAX_CHUNK {
            return Err(DnError::new(
                DnCode::OutOfRange,
                format!(
                    "[{offset}, {end}) of block {id} is {len} bytes, above the {MAX_CHUNK} byte read limit; read it in ranges"
                ),
            ));
        }
        let v = &self.volumes[self.readable(id.container_id)?];
        let path = v.block_file(id);
        // Only a missing file is damage; EMFILE, EACCES and the like condemn nothing, and
        // EIO fails the volume, not the container ([`super::faults`]).
        let f = v
            .injected()
            .and_then(|()| std::fs::File::open(&path))
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    let why = format!("{}: {e}", path.display());
                    let _ = self.mark_unhealthy(id.container_id, &why);
                    DnError::new(DnCode::ContainerUnhealthy, why)
                } else {
                    v.fault(&format!("open {}", path.display()), e)
                }
            })?;
        let mut out = Vec::new();
        for c in b
            .chunks
            .iter()
            .filter(|c| c.offset < end && c.end() > offset)
        {
            let from = offset.max(c.offset) - c.offset;
            let to = end.min(c.end()) - c.offset;
            let (s, e, sums) = c.checksum.covering(c.len, from, to);
            let mut data = vec![0u8; (e - s) as usize];
            // A short file or wrong bytes are damage; any other read error is the disk's.
            let res = match f.read_exact_at(&mut data, c.offset + s) {
                Ok(()) => sums.verify(&data).map_err(|m| m.reason),
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    Err(format!("short read: {e}"))
                }
                Err(e) => return Err(v.fault(&format!("read {}", path.display()), e)),
            };
            if let Err(why) = res {
                let why = format!("block {id} at offset {}: {why}", c.offset + s);
                let _ = self.mark_unhealthy(id.container_id, &why);
                return Err(DnError::new(DnCode::ChecksumMismatch, why));
            }
            out.push(Segment {
                offset: c.offset + s,
                data,
                checksum: sums,
            });
        }
        Ok((out, b.bcsid))
    }
}
