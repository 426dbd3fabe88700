//! CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, as zlib's `crc32`): the checksum
//! of every log frame, computed by the `crc32fast` crate (which uses the CPU's carry-less
//! multiplication where it has it).

/// CRC-32 of `bytes`.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytewise definition.
    fn reference(bytes: &[u8]) -> u32 {
        let mut c = !0u32;
        for b in bytes {
            c ^= u32::from(*b);
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        !c
    }

    /// Bytes that do not repeat with any short period.
    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(&[0u8; 64]), reference(&[0u8; 64]));
    }

    #[test]
    fn every_length_and_start_gives_the_bytewise_value() {
        // Every length across short inputs and the crate's 16- and 64-byte blocks, from
        // every start within a block.
        let data = noise(700, 1);
        for start in 0..16 {
            for n in 0..data.len() - start {
                let b = &data[start..start + n];
                assert_eq!(crc32(b), reference(b), "start {start}, length {n}");
            }
        }
        for (n, seed) in [(16 * 1024, 2), (16 * 1024 + 37, 3), (1 << 20, 4)] {
            let b = noise(n, seed);
            assert_eq!(crc32(&b), reference(&b), "length {n}");
        }
    }
}
