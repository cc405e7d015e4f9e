//! The content digest of a replica: its block count and a running digest of its committed
//! blocks (each block's local id, length and chunk checksums), updated wherever a block is
//! committed, replaced or deleted. Two replicas holding the same blocks have the same digest
//! whatever order they applied them in (an imported copy computes it from its blocks), so
//! the SCM can tell a short or differing copy from a full one at the same BCSID.
//!
//! The digest of a block set is the wrapping sum of one 64-bit FNV-1a hash per block:
//! order-independent, and a block leaves it by subtraction. The block's BCSID is not part
//! of it (a re-replicated copy keeps the blocks, not necessarily the log positions).
//!
//! Stored per container as a versioned, append-only record ([`ContentDigest::encode`]):
//! version 1 is `[1][block_count: u64 BE][sum: u64 BE]`; a later version may only append
//! fields, so a reader of version 1 reads the first 17 bytes of any newer record.

use crate::error::DnError;
use crate::types::BlockData;
pub use crate::types::ContentDigest;

/// The digest rule this build computes (reported beside the digest).
pub const DIGEST_VERSION: u8 = 1;

/// Length of a version-1 record.
const V1_LEN: usize = 17;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME))
}

/// The hash of one committed block: local id, length, then every chunk's offset, length,
/// checksum type, window and values, all big-endian.
pub fn block_hash(b: &BlockData) -> u64 {
    let mut h = fnv1a(FNV_OFFSET, &b.id.local_id.to_be_bytes());
    h = fnv1a(h, &b.length.to_be_bytes());
    for c in &b.chunks {
        h = fnv1a(h, &c.offset.to_be_bytes());
        h = fnv1a(h, &c.len.to_be_bytes());
        h = fnv1a(h, &[c.checksum.kind.to_wire() as u8]);
        h = fnv1a(h, &c.checksum.bytes_per_checksum.to_be_bytes());
        for v in &c.checksum.values {
            h = fnv1a(h, &v.to_be_bytes());
        }
    }
    h
}

impl ContentDigest {
    /// The digest of a block set (an imported replica, a check).
    pub fn of<'a>(blocks: impl IntoIterator<Item = &'a BlockData>) -> Self {
        let mut d = Self::default();
        for b in blocks {
            d.add(b);
        }
        d
    }

    /// A block was committed.
    pub fn add(&mut self, b: &BlockData) {
        self.block_count = self.block_count.saturating_add(1);
        self.sum = self.sum.wrapping_add(block_hash(b));
    }

    /// A committed block was deleted (or is being replaced).
    pub fn remove(&mut self, b: &BlockData) {
        self.block_count = self.block_count.saturating_sub(1);
        self.sum = self.sum.wrapping_sub(block_hash(b));
    }

    /// The stored record (current version).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(V1_LEN);
        out.push(DIGEST_VERSION);
        out.extend_from_slice(&self.block_count.to_be_bytes());
        out.extend_from_slice(&self.sum.to_be_bytes());
        out
    }

    /// Reads a stored record of version 1 or later (later versions only append).
    pub fn decode(b: &[u8]) -> Result<Self, DnError> {
        match b.first() {
            Some(v) if *v >= 1 && b.len() >= V1_LEN => {
                let word = |at: usize| {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(&b[at..at + 8]);
                    u64::from_be_bytes(w)
                };
                Ok(Self {
                    block_count: word(1),
                    sum: word(9),
                })
            }
            _ => Err(DnError::io(
                "decode content digest",
                format!("{} bytes, version {:?}", b.len(), b.first()),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use rozone_types::checksum::{ChecksumData, ChecksumType};
    use rozone_types::BlockId;

    use super::*;
    use crate::types::ChunkInfo;

    fn block(local_id: u64, data: &[u8]) -> BlockData {
        let chunk = ChunkInfo {
            offset: 0,
            len: data.len() as u64,
            checksum: ChecksumData::compute(ChecksumType::Crc32c, 4, data),
        };
        BlockData {
            id: BlockId {
                container_id: 9,
                local_id,
            },
            chunks: vec![chunk],
            length: data.len() as u64,
            bcsid: local_id * 10,
        }
    }

    /// Golden values: the rule and the record format are part of what replicas report and
    /// store. A change here is a new DIGEST_VERSION, never an edit of version 1. The values
    /// were computed by an independent reference (bit-wise CRC32C and FNV-1a in Python).
    #[test]
    fn digest_rule_and_record_format_are_stable() {
        let blocks = [block(1, b"hello world"), block(2, b"rozone")];
        assert_eq!(block_hash(&blocks[0]), 0x52ed_30de_0f7a_8b9e);
        let d = ContentDigest::of(&blocks);
        assert_eq!(d.block_count, 2);
        assert_eq!(d.sum, 0x27a2_2f14_be79_52eb);
        let rec = d.encode();
        assert_eq!(rec.len(), V1_LEN);
        assert_eq!(rec[0], 1);
        assert_eq!(ContentDigest::decode(&rec).unwrap(), d);
        // A later version appends fields: a version-1 reader reads the prefix.
        let mut v2 = rec.clone();
        v2[0] = 2;
        v2.extend_from_slice(&[0xAA; 5]);
        assert_eq!(ContentDigest::decode(&v2).unwrap(), d);
        assert!(ContentDigest::decode(&rec[..10]).is_err());
        assert!(ContentDigest::decode(&[0; V1_LEN]).is_err());
    }

    #[test]
    fn digest_is_order_independent_and_blocks_leave_by_subtraction() {
        let (a, b, c) = (block(1, b"a"), block(2, b"bb"), block(3, b"ccc"));
        let abc = ContentDigest::of([&a, &b, &c]);
        assert_eq!(abc, ContentDigest::of([&c, &a, &b]));
        let mut d = abc;
        d.remove(&b);
        assert_eq!(d, ContentDigest::of([&a, &c]));
        // Same count, one block's bytes differ (or the bcsid alone differs: not part of it).
        let mut b2 = block(2, b"bx");
        assert_ne!(ContentDigest::of([&a, &b2, &c]), abc);
        b2 = BlockData {
            bcsid: 77,
            ..b.clone()
        };
        assert_eq!(ContentDigest::of([&a, &b2, &c]), abc);
    }
}
