//! The chunk compressor: LZ4 block format, written for the writer's chunks.
//!
//! Any LZ4 block decoder reads what this writes (the reader uses `lz4_flex`'s); only the
//! compressor is ours, because LZ4 is the largest single cost of the writer thread and two things
//! make it cheaper for these chunks (measured: `docs/overhead.md`, *The writer's cost per
//! record*):
//!
//! - Its hash table lives as long as the writer and is never cleared. A slot may hold a position
//!   from an earlier chunk; a candidate is used only if it lies before the current position and
//!   its four bytes equal the current ones, so a stale slot costs at most a missed match, never a
//!   wrong one. `lz4_flex` allocates and zeroes a table per chunk.
//! - Encoded records are dense (varint deltas, timestamps): about half the positions start no
//!   match. The search steps ahead faster after misses than LZ4's default (`SKIP_SHIFT`), which
//!   trades a few percent of compression for fewer probes.
//!
//! Format (the LZ4 block specification): sequences of a token (literal length << 4 | match length
//! − 4, each 15 = more bytes follow, 255 per byte), the literals, a 2-byte little-endian offset
//! and the match length's extra bytes; the last sequence is literals only. A match starts at
//! least [`MFLIMIT`] bytes before the end and ends at least [`LAST_LITERALS`] bytes before it.

/// log2 of the hash table's slots.
const HASH_LOG: u32 = 12;
/// The last match starts at least this many bytes before the end of the block.
const MFLIMIT: usize = 12;
/// The last bytes of a block are always literals.
const LAST_LITERALS: usize = 5;
/// Largest match offset.
const MAX_OFFSET: usize = u16::MAX as usize;
/// After `1 << SKIP_SHIFT` probes without a match the search moves 2 bytes at a time, after
/// twice that 3, ... (LZ4's default is 6; `lz4_flex`'s 5): 2 costs about 4 % of compression
/// on typed traces and saves about a tenth of the compressor's instructions. 0 would save about
/// a quarter of them but store an eighth to a quarter more bytes (`docs/overhead.md`, *The writer's
/// cost per record*): files users keep grow, for under 0.1 % of a traced program's instructions.
const SKIP_SHIFT: u32 = 2;

/// An LZ4 block compressor that keeps its hash table between blocks.
#[derive(Debug)]
pub(crate) struct Lz4Compressor {
    table: Box<[u32; 1 << HASH_LOG]>,
}

impl Default for Lz4Compressor {
    fn default() -> Self {
        Self { table: Box::new([0; 1 << HASH_LOG]) }
    }
}

#[inline(always)]
fn read_u32(input: &[u8], at: usize) -> u32 {
    match input.get(at..at + 4) {
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
        _ => 0,
    }
}

#[inline(always)]
fn read_u64(input: &[u8], at: usize) -> u64 {
    match input.get(at..at + 8) {
        Some(b) => u64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
        None => 0,
    }
}

#[inline(always)]
fn hash(v: u32) -> usize {
    (v.wrapping_mul(2_654_435_761) >> (32 - HASH_LOG)) as usize
}

/// The output block: a slice with room for the largest block plus a wild copy's slack, and the
/// write position.
struct Out<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Out<'_> {
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.at) {
            *slot = b;
        }
        self.at += 1;
    }

    #[inline]
    fn length(&mut self, mut len: usize) {
        while len >= 255 {
            self.byte(255);
            len -= 255;
        }
        self.byte(len as u8);
    }

    /// The token and the literals `input[from..to]`.
    #[inline(always)]
    fn literals(&mut self, input: &[u8], from: usize, to: usize, match_token: u8) {
        let n = to - from;
        self.byte(((n.min(15) as u8) << 4) | match_token);
        if n >= 15 {
            self.length(n - 15);
        }
        // Short runs (most of them): one fixed 16-byte copy; the bytes past the run are
        // overwritten by what follows (`WILD_SLACK` keeps them inside the buffer).
        if n <= 16
            && let (Some(src), Some(dst)) = (input.get(from..from + 16), self.buf.get_mut(self.at..self.at + 16))
        {
            dst.copy_from_slice(src);
        } else if let (Some(src), Some(dst)) = (input.get(from..to), self.buf.get_mut(self.at..self.at + n)) {
            dst.copy_from_slice(src);
        }
        self.at += n;
    }
}

/// Room past the largest block for the 16-byte literal copies.
const WILD_SLACK: usize = 16;

/// Bytes equal at `a` and `b` (`a < b`), counted from there up to `end` (exclusive) for `b`.
#[inline(always)]
fn common_length(input: &[u8], mut a: usize, mut b: usize, end: usize) -> usize {
    let start = b;
    while b + 8 <= end {
        let x = read_u64(input, a) ^ read_u64(input, b);
        if x != 0 {
            return b - start + (x.trailing_zeros() / 8) as usize;
        }
        a += 8;
        b += 8;
    }
    while b < end && input.get(a) == input.get(b) {
        a += 1;
        b += 1;
    }
    b - start
}

impl Lz4Compressor {
    /// Compresses `input` as one LZ4 block into the start of `out` (grown if needed, never
    /// shrunk: zeroing it per block would cost a byte's store per byte); returns the block's
    /// length.
    pub(crate) fn compress(&mut self, input: &[u8], out: &mut Vec<u8>) -> usize {
        let n = input.len();
        let room = max_compressed_len(n) + WILD_SLACK;
        if out.len() < room {
            out.resize(room, 0);
        }
        let mut o = Out { buf: out, at: 0 };
        let mut anchor = 0;
        if n > MFLIMIT {
            let limit = n - MFLIMIT;
            let match_end = n - LAST_LITERALS;
            let table = &mut *self.table;
            let mut cur = 0;
            let mut probes = 1u32 << SKIP_SHIFT;
            while cur <= limit {
                let seq = read_u32(input, cur);
                let h = hash(seq);
                let candidate = table[h] as usize;
                table[h] = cur as u32;
                // A slot may be stale (an earlier block, or past `cur`): only the equality of
                // the bytes and the offset range make it a match.
                if candidate >= cur || cur - candidate > MAX_OFFSET || read_u32(input, candidate) != seq {
                    cur += (probes >> SKIP_SHIFT) as usize;
                    probes += 1;
                    continue;
                }
                probes = 1 << SKIP_SHIFT;
                let (mut start, mut from) = (cur, candidate);
                while start > anchor && from > 0 && input.get(start - 1) == input.get(from - 1) {
                    start -= 1;
                    from -= 1;
                }
                let len = 4 + common_length(input, from + 4, start + 4, match_end);
                let extra = len - 4;
                o.literals(input, anchor, start, extra.min(15) as u8);
                let offset = (start - from) as u16;
                o.byte(offset as u8);
                o.byte((offset >> 8) as u8);
                if extra >= 15 {
                    o.length(extra - 15);
                }
                anchor = start + len;
                cur = anchor;
                // The position just before the match's end: the next record often repeats it.
                if cur - 2 <= limit {
                    table[hash(read_u32(input, cur - 2))] = (cur - 2) as u32;
                }
            }
        }
        o.literals(input, anchor, n, 0);
        o.at
    }
}

/// The largest block `compress` writes for `n` input bytes.
pub(crate) const fn max_compressed_len(n: usize) -> usize {
    n + n / 255 + 16
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(c: &mut Lz4Compressor, input: &[u8]) -> usize {
        let mut out = Vec::new();
        let len = c.compress(input, &mut out);
        assert!(len <= max_compressed_len(input.len()));
        let out = &out[..len];
        let mut back = vec![0; input.len()];
        let n = lz4_flex::block::decompress_into(out, &mut back).expect("a valid LZ4 block");
        assert_eq!(n, input.len());
        assert_eq!(back, input);
        len
    }

    #[test]
    fn short_and_edge_lengths_round_trip() {
        let mut c = Lz4Compressor::default();
        for n in 0..80 {
            round_trip(&mut c, &vec![7u8; n]);
            round_trip(&mut c, &(0..n).map(|i| (i * 37 % 251) as u8).collect::<Vec<_>>());
        }
    }

    #[test]
    fn long_literal_runs_and_long_matches_round_trip() {
        let mut c = Lz4Compressor::default();
        let noise: Vec<u8> = (0..70_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        round_trip(&mut c, &noise);
        let zeros = vec![0u8; 200_000];
        assert!(round_trip(&mut c, &zeros) < 1_000);
        // Offsets past 64 KiB: the repeat of the first block is too far to reference.
        let mut far = noise.clone();
        far.extend_from_slice(&noise);
        round_trip(&mut c, &far);
    }

    #[test]
    fn a_stale_table_from_another_block_never_makes_a_wrong_match() {
        let mut c = Lz4Compressor::default();
        let a: Vec<u8> = (0..5_000u32).map(|i| (i % 97) as u8).collect();
        let b: Vec<u8> = (0..3_000u32).map(|i| (i % 89) as u8 ^ 0x55).collect();
        for _ in 0..3 {
            round_trip(&mut c, &a);
            round_trip(&mut c, &b);
            round_trip(&mut c, &a[..100]);
        }
    }

    proptest! {
        #[test]
        fn any_input_round_trips(blocks in proptest::collection::vec(
            proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..3_000), 1..4)) {
            let mut c = Lz4Compressor::default();
            for b in &blocks {
                round_trip(&mut c, b);
            }
        }
    }
}
