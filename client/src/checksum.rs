//! Chunk checksums as the datanode protocol carries them: one CRC per `bytes_per_checksum`
//! window, windows from the range's first byte. The client computes them on write and
//! verifies every byte it reads against them, so a corrupt replica is caught here.

use rozone_proto::datanode::{ChecksumData, ChecksumType};

/// The window the client writes with: small enough that a read of a few KiB verifies
/// little more than it asked for, large enough that the list stays short.
pub const BYTES_PER_CHECKSUM: u32 = 16 * 1024;

/// CRC32 (IEEE) checksums of `data` in windows of `bpc` bytes.
pub fn compute(data: &[u8], bpc: u32) -> ChecksumData {
    let w = bpc.max(1) as usize;
    ChecksumData {
        r#type: ChecksumType::Crc32 as i32,
        bytes_per_checksum: bpc,
        checksums: data.chunks(w).map(crc32fast::hash).collect(),
    }
}

/// CRC32C (Castagnoli), bitwise-table form: only needed when a server computed the
/// checksums itself with this type (our writers use CRC32).
pub fn crc32c(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0x82F6_3B78 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *e = c;
        }
        t
    });
    let mut c = !0u32;
    for b in data {
        c = t[((c ^ *b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// Checks `data` against `sum`; `Err` says which window is wrong.
pub fn verify(data: &[u8], sum: Option<&ChecksumData>) -> Result<(), String> {
    let Some(sum) = sum else {
        return Err("no checksum sent with the data".into());
    };
    let ty = sum.r#type();
    let f: fn(&[u8]) -> u32 = match ty {
        ChecksumType::None => return Ok(()),
        ChecksumType::Crc32 => crc32fast::hash,
        ChecksumType::Crc32c => crc32c,
        ChecksumType::Unspecified => return Err("checksum type unspecified".into()),
    };
    let windows: Vec<&[u8]> = if sum.bytes_per_checksum == 0 {
        vec![data]
    } else {
        data.chunks(sum.bytes_per_checksum as usize).collect()
    };
    if windows.len() != sum.checksums.len() {
        return Err(format!(
            "{} bytes need {} checksums, got {}",
            data.len(),
            windows.len(),
            sum.checksums.len()
        ));
    }
    for (i, (w, want)) in windows.iter().zip(&sum.checksums).enumerate() {
        let got = f(w);
        if got != *want {
            return Err(format!(
                "checksum mismatch in window {i}: {got:08x} != {want:08x}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifies_what_it_computed_and_catches_a_flipped_bit() {
        let mut data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let sum = compute(&data, BYTES_PER_CHECKSUM);
        assert_eq!(sum.checksums.len(), 7);
        verify(&data, Some(&sum)).unwrap();
        data[40_000] ^= 1;
        let err = verify(&data, Some(&sum)).unwrap_err();
        assert!(err.contains("window 2"), "{err}");
        assert!(verify(&data[..10], Some(&sum)).is_err());
    }

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }
}
