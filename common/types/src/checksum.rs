//! The chunk checksum rule: CRC32 or CRC32C per `bytes_per_checksum` window, windows from
//! the range's first byte (0: one window over the whole range). Writers compute it, the
//! datanode verifies it on every write stage, apply, read and replication import, and the
//! client verifies every byte it reads, so a corrupt replica is caught wherever it is read.
//!
//! CRC32 uses `crc32fast` (SIMD where the CPU has it); CRC32C is slice-by-8 tables here,
//! so no extra dependency is needed.

use rozone_proto::datanode as pb;
use serde::{Deserialize, Serialize};

use crate::ids::Invalid;

/// Checksum algorithm of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChecksumType {
    None,
    Crc32,
    Crc32c,
}

/// Checksums of a byte range, one per window of `bytes_per_checksum` (0: one window).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChecksumData {
    pub kind: ChecksumType,
    pub bytes_per_checksum: u32,
    pub values: Vec<u32>,
}

/// Where a range differs from its checksums.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Byte offset (within the range) of the first bad window.
    pub at: u64,
    pub reason: String,
}

const CRC32C_POLY: u32 = 0x82F6_3B78;

const fn crc32c_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ CRC32C_POLY
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut j = 1;
        while j < 8 {
            let prev = t[j - 1][i];
            t[j][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            j += 1;
        }
        i += 1;
    }
    t
}

static CRC32C: [[u32; 256]; 8] = crc32c_tables();

/// Continues a CRC32C over `data` (start with `crc = 0`).
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    let t = &CRC32C;
    let mut c = !crc;
    let mut chunks = data.chunks_exact(8);
    for b in &mut chunks {
        let lo = c ^ u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let hi = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        c = t[7][(lo & 0xff) as usize]
            ^ t[6][((lo >> 8) & 0xff) as usize]
            ^ t[5][((lo >> 16) & 0xff) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xff) as usize]
            ^ t[2][((hi >> 8) & 0xff) as usize]
            ^ t[1][((hi >> 16) & 0xff) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        c = (c >> 8) ^ t[0][((c ^ b as u32) & 0xff) as usize];
    }
    !c
}

/// CRC32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

fn one(kind: ChecksumType, data: &[u8]) -> u32 {
    match kind {
        ChecksumType::None => 0,
        ChecksumType::Crc32 => crc32fast::hash(data),
        ChecksumType::Crc32c => crc32c(data),
    }
}

impl ChecksumData {
    /// Window size in bytes for a range of `len` bytes.
    pub fn window(&self, len: u64) -> u64 {
        if self.bytes_per_checksum == 0 {
            len.max(1)
        } else {
            self.bytes_per_checksum as u64
        }
    }

    /// Number of checksums a range of `len` bytes needs.
    pub fn expected_count(&self, len: u64) -> usize {
        if self.kind == ChecksumType::None {
            return 0;
        }
        len.div_ceil(self.window(len)) as usize
    }

    /// Computes checksums of `data`.
    pub fn compute(kind: ChecksumType, bytes_per_checksum: u32, data: &[u8]) -> Self {
        let mut c = Self {
            kind,
            bytes_per_checksum,
            values: Vec::new(),
        };
        if kind != ChecksumType::None {
            let w = c.window(data.len() as u64) as usize;
            c.values = data.chunks(w).map(|d| one(kind, d)).collect();
        }
        c
    }

    /// Checks `data` (the whole range these checksums cover).
    pub fn verify(&self, data: &[u8]) -> Result<(), Mismatch> {
        if self.kind == ChecksumType::None {
            return Ok(());
        }
        let len = data.len() as u64;
        if self.values.len() != self.expected_count(len) {
            return Err(Mismatch {
                at: 0,
                reason: format!(
                    "{} bytes need {} checksums, {} given",
                    len,
                    self.expected_count(len),
                    self.values.len()
                ),
            });
        }
        let w = self.window(len) as usize;
        for (i, (d, want)) in data.chunks(w).zip(&self.values).enumerate() {
            let got = one(self.kind, d);
            if got != *want {
                return Err(Mismatch {
                    at: (i * w) as u64,
                    reason: format!("checksum {got:08x} != expected {want:08x}"),
                });
            }
        }
        Ok(())
    }

    /// The checksums covering bytes `[from, to)` of the range (of length `len`), widened to
    /// whole windows: returns the widened start and end and their checksums.
    pub fn covering(&self, len: u64, from: u64, to: u64) -> (u64, u64, ChecksumData) {
        if self.kind == ChecksumType::None {
            return (from, to, self.clone());
        }
        let w = self.window(len);
        let first = from / w;
        let last = to.div_ceil(w).max(first + 1);
        let start = first * w;
        let end = (last * w).min(len);
        let values = self
            .values
            .get(first as usize..(last as usize).min(self.values.len()))
            .unwrap_or_default()
            .to_vec();
        let bpc = if self.bytes_per_checksum == 0 {
            0
        } else {
            self.bytes_per_checksum
        };
        (
            start,
            end,
            ChecksumData {
                kind: self.kind,
                bytes_per_checksum: bpc,
                values,
            },
        )
    }
}

/// Checksums over a stream of bytes arriving in pieces of any size.
pub struct StreamSummer {
    kind: ChecksumType,
    bpc: u32,
    cur: Vec<u8>,
    values: Vec<u32>,
    total: u64,
    whole: u32,
}

impl StreamSummer {
    pub fn new(kind: ChecksumType, bytes_per_checksum: u32) -> Self {
        Self {
            kind,
            bpc: bytes_per_checksum,
            cur: Vec::new(),
            values: Vec::new(),
            total: 0,
            whole: 0,
        }
    }

    pub fn update(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.kind == ChecksumType::None {
            return;
        }
        if self.bpc == 0 {
            // One checksum over everything: keep a running CRC.
            self.whole = match self.kind {
                ChecksumType::Crc32 => {
                    let mut h = crc32fast::Hasher::new_with_initial(self.whole);
                    h.update(data);
                    h.finalize()
                }
                _ => crc32c_append(self.whole, data),
            };
            return;
        }
        let w = self.bpc as usize;
        while !data.is_empty() {
            let take = (w - self.cur.len()).min(data.len());
            self.cur.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.cur.len() == w {
                self.values.push(one(self.kind, &self.cur));
                self.cur.clear();
            }
        }
    }

    pub fn len(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    pub fn finish(mut self) -> ChecksumData {
        if self.kind != ChecksumType::None {
            if self.bpc == 0 {
                self.values = vec![self.whole];
            } else if !self.cur.is_empty() {
                self.values.push(one(self.kind, &self.cur));
            }
        }
        ChecksumData {
            kind: self.kind,
            bytes_per_checksum: self.bpc,
            values: self.values,
        }
    }
}

impl ChecksumType {
    /// From the wire enum; `UNSPECIFIED` and unknown values are refused.
    pub fn from_wire(t: i32) -> Result<Self, Invalid> {
        match pb::ChecksumType::try_from(t) {
            Ok(pb::ChecksumType::None) => Ok(Self::None),
            Ok(pb::ChecksumType::Crc32) => Ok(Self::Crc32),
            Ok(pb::ChecksumType::Crc32c) => Ok(Self::Crc32c),
            _ => Err(Invalid::new(
                "type",
                format!("{t} is not NONE, CRC32 or CRC32C"),
            )),
        }
    }

    pub fn to_wire(self) -> i32 {
        match self {
            Self::None => pb::ChecksumType::None as i32,
            Self::Crc32 => pb::ChecksumType::Crc32 as i32,
            Self::Crc32c => pb::ChecksumType::Crc32c as i32,
        }
    }
}

impl TryFrom<pb::ChecksumData> for ChecksumData {
    type Error = Invalid;
    fn try_from(c: pb::ChecksumData) -> Result<Self, Invalid> {
        Ok(Self {
            kind: ChecksumType::from_wire(c.r#type)?,
            bytes_per_checksum: c.bytes_per_checksum,
            values: c.checksums,
        })
    }
}

impl From<&ChecksumData> for pb::ChecksumData {
    fn from(c: &ChecksumData) -> Self {
        Self {
            r#type: c.kind.to_wire(),
            bytes_per_checksum: c.bytes_per_checksum,
            checksums: c.values.clone(),
        }
    }
}

impl From<ChecksumData> for pb::ChecksumData {
    fn from(c: ChecksumData) -> Self {
        Self {
            r#type: c.kind.to_wire(),
            bytes_per_checksum: c.bytes_per_checksum,
            checksums: c.values,
        }
    }
}

/// Checks `data` against checksums as they came from the wire (a reader's check):
/// `Err` says what is wrong, including a missing or malformed checksum.
pub fn verify_wire(data: &[u8], sum: Option<&pb::ChecksumData>) -> Result<(), String> {
    let sum = sum.ok_or("no checksum sent with the data")?;
    let sum = ChecksumData::try_from(sum.clone()).map_err(|e| format!("checksum {e}"))?;
    sum.verify(data)
        .map_err(|m| format!("at byte {}: {}", m.at, m.reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_known_vectors() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let split = crc32c_append(crc32c(&data[..333]), &data[333..]);
        assert_eq!(split, crc32c(&data));
    }

    #[test]
    fn verify_detects_a_flipped_byte_and_wrong_counts() {
        let data = vec![5u8; 40_000];
        let c = ChecksumData::compute(ChecksumType::Crc32c, 16_384, &data);
        assert_eq!(c.values.len(), 3);
        c.verify(&data).unwrap();
        let mut bad = data.clone();
        bad[20_000] ^= 1;
        assert_eq!(c.verify(&bad).unwrap_err().at, 16_384);
        assert!(c.verify(&data[..100]).is_err());
        let c32 = ChecksumData::compute(ChecksumType::Crc32, 0, &data);
        assert_eq!(c32.values, vec![crc32fast::hash(&data)]);
    }

    #[test]
    fn stream_summer_equals_compute() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        for bpc in [0, 1000, 16_384] {
            let mut s = StreamSummer::new(ChecksumType::Crc32c, bpc);
            for piece in data.chunks(777) {
                s.update(piece);
            }
            assert_eq!(
                s.finish(),
                ChecksumData::compute(ChecksumType::Crc32c, bpc, &data)
            );
        }
    }

    #[test]
    fn covering_widens_to_windows() {
        let data = vec![1u8; 10_000];
        let c = ChecksumData::compute(ChecksumType::Crc32, 4096, &data);
        let (s, e, sub) = c.covering(10_000, 5000, 5001);
        assert_eq!((s, e), (4096, 8192));
        sub.verify(&data[s as usize..e as usize]).unwrap();
        let (s, e, sub) = c.covering(10_000, 9000, 10_000);
        assert_eq!((s, e), (8192, 10_000));
        sub.verify(&data[s as usize..e as usize]).unwrap();
    }

    #[test]
    fn wire_checksums_verify_and_catch_a_flipped_bit() {
        let mut data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let sum: pb::ChecksumData =
            ChecksumData::compute(ChecksumType::Crc32, 16 * 1024, &data).into();
        assert_eq!(sum.checksums.len(), 7);
        verify_wire(&data, Some(&sum)).unwrap();
        data[40_000] ^= 1;
        let err = verify_wire(&data, Some(&sum)).unwrap_err();
        assert!(err.contains("at byte 32768"), "{err}");
        assert!(verify_wire(&data[..10], Some(&sum)).is_err());
        assert!(verify_wire(&data, None).is_err());
        let mut unspecified = sum.clone();
        unspecified.r#type = 0;
        assert!(verify_wire(&data, Some(&unspecified))
            .unwrap_err()
            .contains("type"));
    }
}
