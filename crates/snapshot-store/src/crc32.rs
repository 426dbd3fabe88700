//! CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, as zlib's `crc32`): the checksum
//! of every log frame. Long inputs are folded 64 bytes at a time with carry-less
//! multiplication where the CPU has it (x86-64 `pclmulqdq`), the rest eight bytes per
//! table step; both give the same value for every input.

/// CRC-32 of `bytes`.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    !update(!0, bytes)
}

/// The CRC register after `bytes`, starting from register `c` (no pre- or post-inversion).
fn update(c: u32, bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if bytes.len() >= FOLD_MIN && clmul::available() {
        return clmul::update(c, bytes);
    }
    update_table(c, bytes)
}

/// Shortest input the folding path takes (shorter ones cost less by table).
#[cfg(target_arch = "x86_64")]
const FOLD_MIN: usize = 64;

/// Slicing-by-8 tables of the reflected polynomial.
const CRC_TABLES: [[u32; 256]; 8] = {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
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
            t[j][i] = (prev >> 8) ^ t[0][(prev & 0xFF) as usize];
            j += 1;
        }
        i += 1;
    }
    t
};

/// [`update`] by table, eight bytes per step.
fn update_table(mut c: u32, bytes: &[u8]) -> u32 {
    let t = &CRC_TABLES;
    let mut chunks = bytes.chunks_exact(8);
    for ch in &mut chunks {
        let lo = c ^ u32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]]);
        let hi = u32::from_le_bytes([ch[4], ch[5], ch[6], ch[7]]);
        c = t[7][(lo & 0xFF) as usize]
            ^ t[6][((lo >> 8) & 0xFF) as usize]
            ^ t[5][((lo >> 16) & 0xFF) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xFF) as usize]
            ^ t[2][((hi >> 8) & 0xFF) as usize]
            ^ t[1][((hi >> 16) & 0xFF) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for b in chunks.remainder() {
        c = t[0][((c ^ u32::from(*b)) & 0xFF) as usize] ^ (c >> 8);
    }
    c
}

/// Folding by carry-less multiplication.
///
/// The input is taken as a polynomial over GF(2), its first bit the highest term; a
/// 16-byte block loaded little-endian holds its first bit in bit 0 (the reflected
/// order). A block `A = A_hi·x^64 + A_lo` (`A_hi` its first eight bytes) followed by
/// `T` more bits of input can be replaced, modulo the polynomial `P`, by the 96-bit
/// `A_hi·(x^(T+64) mod P) + A_lo·(x^T mod P)` placed in the block `T` bits later. In
/// the reflected order a 64×64-bit carry-less product comes out one bit short, so
/// each factor is `x^(n-1) mod P`, bit-reversed into a 64-bit lane. The state left
/// after the last whole block is handed to the table steps as a 16-byte input from a
/// zero register, which reduces it, and the table takes the tail after it.
#[cfg(target_arch = "x86_64")]
mod clmul {
    use std::arch::x86_64::{
        __m128i, _mm_clmulepi64_si128, _mm_cvtsi32_si128, _mm_cvtsi128_si64, _mm_extract_epi64,
        _mm_set_epi64x, _mm_xor_si128,
    };

    /// `x^n mod P` (normal bit order, `P` = 0x1_04C1_1DB7), bit-reversed into 64 bits.
    const fn factor(n: u32) -> i64 {
        let mut r: u32 = 1;
        let mut i = 0;
        while i < n {
            let carry = r & 0x8000_0000 != 0;
            r <<= 1;
            if carry {
                r ^= 0x04C1_1DB7;
            }
            i += 1;
        }
        ((r.reverse_bits() as u64) << 32) as i64
    }

    /// Factors folding a block over 512 bits (four blocks on) and over 128 bits (the next
    /// block): `(for A_hi, for A_lo)`.
    const BY_512: (i64, i64) = (factor(512 + 64 - 1), factor(512 - 1));
    const BY_128: (i64, i64) = (factor(128 + 64 - 1), factor(128 - 1));

    /// Whether this CPU multiplies carry-less (checked once, then cached by `std`).
    pub(super) fn available() -> bool {
        std::is_x86_feature_detected!("pclmulqdq") && std::is_x86_feature_detected!("sse4.1")
    }

    /// [`super::update`] of at least 64 bytes; the CPU must be [`available`].
    pub(super) fn update(c: u32, bytes: &[u8]) -> u32 {
        debug_assert!(bytes.len() >= 64 && available());
        // SAFETY: `available` found both target features of `fold` on this CPU, and
        // `fold` does nothing else unsafe (its loads go through safe byte slices).
        #[allow(unsafe_code)]
        unsafe {
            fold(c, bytes)
        }
    }

    #[target_feature(enable = "pclmulqdq,sse4.1")]
    fn load(b: &[u8]) -> __m128i {
        let lo = i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        let hi = i64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]);
        _mm_set_epi64x(hi, lo)
    }

    /// The block `x` moved on over the distance the factors `k` (`(hi, lo)` lanes as
    /// in `BY_*`, set into one register) stand for.
    #[target_feature(enable = "pclmulqdq,sse4.1")]
    fn over(x: __m128i, k: __m128i) -> __m128i {
        _mm_xor_si128(
            _mm_clmulepi64_si128::<0x00>(x, k),
            _mm_clmulepi64_si128::<0x11>(x, k),
        )
    }

    #[target_feature(enable = "pclmulqdq,sse4.1")]
    fn fold(c: u32, bytes: &[u8]) -> u32 {
        let k512 = _mm_set_epi64x(BY_512.1, BY_512.0);
        let k128 = _mm_set_epi64x(BY_128.1, BY_128.0);
        let mut x = [
            _mm_xor_si128(load(&bytes[0..16]), _mm_cvtsi32_si128(c as i32)),
            load(&bytes[16..32]),
            load(&bytes[32..48]),
            load(&bytes[48..64]),
        ];
        let mut rest = &bytes[64..];
        while rest.len() >= 64 {
            for (i, xi) in x.iter_mut().enumerate() {
                *xi = _mm_xor_si128(over(*xi, k512), load(&rest[16 * i..16 * i + 16]));
            }
            rest = &rest[64..];
        }
        let mut y = x[0];
        for xi in &x[1..] {
            y = _mm_xor_si128(over(y, k128), *xi);
        }
        while rest.len() >= 16 {
            y = _mm_xor_si128(over(y, k128), load(&rest[..16]));
            rest = &rest[16..];
        }
        let mut state = [0u8; 16];
        state[..8].copy_from_slice(&_mm_cvtsi128_si64(y).to_le_bytes());
        state[8..].copy_from_slice(&_mm_extract_epi64::<1>(y).to_le_bytes());
        super::update_table(super::update_table(0, &state), rest)
    }
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
        // Every length across the table's 8-byte steps and the folding's 16- and
        // 64-byte blocks, from every start within a block.
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

    #[test]
    fn folding_and_table_agree_from_any_register() {
        #[cfg(target_arch = "x86_64")]
        {
            if !clmul::available() {
                eprintln!("this CPU has no pclmulqdq: only the table path is in use");
                return;
            }
            for (i, n) in [64usize, 65, 79, 80, 127, 128, 129, 191, 192, 4096, 16_421]
                .into_iter()
                .enumerate()
            {
                let b = noise(n, 10 + i as u64);
                for c in [0u32, !0, 0x1234_5678, 0x8000_0001] {
                    assert_eq!(
                        clmul::update(c, &b),
                        update_table(c, &b),
                        "length {n}, register {c:#x}"
                    );
                }
            }
        }
    }
}
