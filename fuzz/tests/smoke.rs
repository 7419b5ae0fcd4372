//! A bounded run of every fuzz target on stable Rust, for the first test tier (no nightly, no
//! libFuzzer): each target gets its seed corpus (the format's fixtures, the inputs of `seed.sh`,
//! and `corpus/<target>/` where a libFuzzer run left one) and then tens of thousands of inputs mutated
//! from it (bit flips, byte overwrites, boundary values, truncation, duplication, deletion,
//! splicing). A panic fails the test and names the input. Not coverage-guided: a smoke test of
//! the decoders, not a replacement for `cargo fuzz run`.
//!
//! `OFFTRACE_FUZZ_ITERATIONS` (default 50,000: about a second per target) sets the mutated inputs per target; `_SEED` the
//! generator's seed (default fixed, so a failure reproduces).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn fixtures() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/offtrace-format/tests/fixtures");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "offtrace"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no fixtures in {}", dir.display());
    paths.iter().map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).collect()
}

/// `corpus/<target>/*`, when a libFuzzer run or `seed.sh` left one (not committed).
fn local_corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.filter_map(|e| e.ok()).filter_map(|e| std::fs::read(e.path()).ok()).take(2000).collect()
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], max_len: usize) -> Vec<u8> {
    let mut v = seeds[rng.below(seeds.len())].clone();
    for _ in 0..1 + rng.below(4) {
        match rng.below(8) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            2 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff][rng.below(6)];
            }
            3 => {
                let n = rng.below(v.len() + 1);
                v.truncate(n);
            }
            4 if !v.is_empty() => {
                let a = rng.below(v.len());
                let b = (a + 1 + rng.below(64)).min(v.len());
                let chunk = v[a..b].to_vec();
                let at = rng.below(v.len() + 1);
                v.splice(at..at, chunk);
            }
            5 if !v.is_empty() => {
                let a = rng.below(v.len());
                let b = (a + 1 + rng.below(64)).min(v.len());
                v.drain(a..b);
            }
            6 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len() + 1);
                let at = rng.below(v.len() + 1);
                v.truncate(at);
                v.extend_from_slice(&other[from..]);
            }
            _ => {
                let at = rng.below(v.len() + 1);
                let bytes: Vec<u8> = (0..1 + rng.below(16)).map(|_| rng.next() as u8).collect();
                v.splice(at..at, bytes);
            }
        }
    }
    v.truncate(max_len);
    v
}

fn run(target: &str, f: fn(&[u8]), mut seeds: Vec<Vec<u8>>) {
    seeds.extend(local_corpus(target));
    let iterations = env_u64("OFFTRACE_FUZZ_ITERATIONS", 50_000);
    let mut rng = Rng(env_u64("OFFTRACE_FUZZ_SEED", 0x0FF7_AACE) | 1);
    let check = |input: &[u8], what: &str| {
        if catch_unwind(AssertUnwindSafe(|| f(input))).is_err() {
            let hex: String = input.iter().take(256).map(|b| format!("{b:02x}")).collect();
            panic!("{target}: panicked on {what} ({} bytes; first 256 in hex: {hex})", input.len());
        }
    };
    for (i, s) in seeds.iter().enumerate() {
        check(s, &format!("seed {i}"));
    }
    for i in 0..iterations {
        let input = mutate(&mut rng, &seeds, 1 << 16);
        check(&input, &format!("mutated input {i}"));
    }
}

#[test]
fn read_trace_survives_its_seeds_and_mutations_of_them() {
    let mut seeds = fixtures();
    let v1 = seeds[0].clone();
    seeds.push(v1[..64.min(v1.len())].to_vec()); // header only
    seeds.push(v1[..700.min(v1.len())].to_vec()); // truncated mid-chunk
    seeds.push(Vec::new());
    run("read_trace", offtrace_format_fuzz::read_trace, seeds);
}

#[test]
fn decode_chunk_survives_its_seeds_and_mutations_of_them() {
    // `seed.sh`'s records: an End record, a notification, a kernel dispatch with one device
    // allocation; then windows of the fixtures (record bytes after the chunk headers).
    let mut seeds: Vec<Vec<u8>> = vec![
        b"\x01\x0a\x00\x00".to_vec(),
        b"\x01\x82\x00\x01\x00\x01\x00\x00\x05\x01\x02\x01\x02".to_vec(),
        b"\x01\x0b\x07\x64\x03\x04\x01\x09\x08\x01\x40\x01\x01\x10\x01\x01\x01\x40\x20\x00\x02".to_vec(),
    ];
    for f in fixtures() {
        for start in (64..f.len()).step_by(512) {
            let end = (start + 512).min(f.len());
            let mut s = vec![8u8];
            s.extend_from_slice(&f[start..end]);
            seeds.push(s);
        }
    }
    run("decode_chunk", offtrace_format_fuzz::decode_chunk, seeds);
}
