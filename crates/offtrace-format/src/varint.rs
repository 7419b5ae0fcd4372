//! LEB128 varints and zigzag: the integer encoding of every record field.
//!
//! Unsigned values are written 7 bits at a time, least significant group first, with the high
//! bit of each byte meaning "more follows": values below 128 cost one byte, a `u64` at most 10.
//! Signed deltas go through zigzag first (`0, -1, 1, -2, ..` → `0, 1, 2, 3, ..`) so that small
//! negative deltas stay small.
//!
//! Writing appends to a `Vec<u8>` whose capacity the writer keeps between chunks, so it does not
//! allocate after warm-up. Reading is bounds-checked and returns `None` on a short or overlong
//! (more than 64 bits) input: it never panics.

/// Longest encoding of a `u64`.
pub(crate) const MAX_VARINT_LEN: usize = 10;

#[inline]
pub(crate) fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Writes the signed difference `v - base` (wrapping, so any pair of `u64`s round-trips).
#[inline]
pub(crate) fn put_delta(out: &mut Vec<u8>, v: u64, base: u64) {
    put_u64(out, zigzag(v.wrapping_sub(base) as i64));
}

/// Inverse of [`put_delta`].
#[inline]
pub(crate) fn apply_delta(base: u64, encoded: u64) -> u64 {
    base.wrapping_add(unzigzag(encoded) as u64)
}

/// Reads one varint from the front of `bytes`: `(value, length)`, or `None` if the input ends
/// inside the varint or it encodes more than 64 bits.
#[inline]
pub(crate) fn get_u64(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (i, &b) in bytes.iter().take(MAX_VARINT_LEN).enumerate() {
        let group = u64::from(b & 0x7f);
        if i == MAX_VARINT_LEN - 1 && group > 1 {
            return None;
        }
        value |= group << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Number of bytes [`put_u64`] writes for `v`.
#[cfg(test)]
pub(crate) fn encoded_len(v: u64) -> usize {
    let bits = 64 - v.leading_zeros() as usize;
    bits.max(1).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Generates a round-trip and length test for values at, just below and just above a limit.
    macro_rules! varint_boundary_tests {
        ($($name:ident: $limit:expr, $len_at:expr;)*) => {$(
            #[test]
            fn $name() {
                let limit: u64 = $limit;
                for v in [limit.saturating_sub(1), limit, limit.saturating_add(1)] {
                    let mut out = Vec::new();
                    put_u64(&mut out, v);
                    assert_eq!(out.len(), encoded_len(v), "length of {v:#x}");
                    assert_eq!(get_u64(&out), Some((v, out.len())), "round trip of {v:#x}");
                    // Every strict prefix is a short read, never a panic or a wrong value.
                    for cut in 0..out.len() {
                        assert_eq!(get_u64(&out[..cut]), None);
                    }
                }
                let mut out = Vec::new();
                put_u64(&mut out, limit);
                assert_eq!(out.len(), $len_at);
            }
        )*};
    }

    varint_boundary_tests! {
        varint_zero: 0, 1;
        varint_1_byte_max: 0x7f, 1;
        varint_2_bytes_min: 0x80, 2;
        varint_2_bytes_max: 0x3fff, 2;
        varint_3_bytes_min: 0x4000, 3;
        varint_u16_max: u64::from(u16::MAX), 3;
        varint_u32_max: u64::from(u32::MAX), 5;
        varint_u32_max_plus_1: u64::from(u32::MAX) + 1, 5;
        varint_9_bytes_max: (1u64 << 63) - 1, 9;
        varint_10_bytes_min: 1u64 << 63, 10;
        varint_u64_max: u64::MAX, 10;
    }

    macro_rules! zigzag_boundary_tests {
        ($($name:ident: $v:expr;)*) => {$(
            #[test]
            fn $name() {
                let v: i64 = $v;
                for x in [v.saturating_sub(1), v, v.saturating_add(1)] {
                    assert_eq!(unzigzag(zigzag(x)), x);
                }
            }
        )*};
    }

    zigzag_boundary_tests! {
        zigzag_zero: 0;
        zigzag_i64_min: i64::MIN;
        zigzag_i64_max: i64::MAX;
        zigzag_minus_64: -64;
        zigzag_63: 63;
    }

    #[test]
    fn overlong_varint_is_rejected() {
        // 10th byte carrying more than bit 63.
        let mut bytes = [0xffu8; 10];
        bytes[9] = 0x02;
        assert_eq!(get_u64(&bytes), None);
        // 11 bytes of continuation.
        assert_eq!(get_u64(&[0x80; 11]), None);
    }

    #[test]
    fn delta_round_trips_across_wrap() {
        for (v, base) in [(0u64, u64::MAX), (u64::MAX, 0), (5, 7), (7, 5), (1 << 63, 0)] {
            let mut out = Vec::new();
            put_delta(&mut out, v, base);
            let (enc, _) = get_u64(&out).expect("valid varint");
            assert_eq!(apply_delta(base, enc), v);
        }
    }
}
