//! Payload name hashing: FNV-1a-32 as in Intel's 2026.2 dispatcher (`xpti::hash::fnv1a`).
//!
//! Cost: about one multiply per byte. The hot creation paths avoid it with a per-thread cache of
//! recently seen (name, file, line, column) keys (`instance.rs`).

/// FNV-1a, 32 bits: offset basis `0x811C9DC5`, prime `0x01000193`.
#[inline]
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811C_9DC5;
    for &b in bytes {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The fast non-cryptographic hash used for the dispatcher's own tables (not visible in the ABI).
#[inline]
pub fn table_hash(bytes: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x6f66_6674_7261_6365).hash_one(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_intel_values() {
        assert_eq!(fnv1a32(b"<unknown-function>"), 0x9f5b_fed8);
        assert_eq!(fnv1a32(b"<unknown-file>"), 0xf0df_b70e);
        assert_eq!(fnv1a32(b"g.cpp"), 0x8658_4e69);
        assert_eq!(fnv1a32(b"f"), 0xe30c_2799);
        assert_eq!(fnv1a32(b"sycl.application.graph"), 0x4962_51d4);
    }
}
