//! Drops against rate: one thread emits UR API calls (enter + exit = one record) through the
//! services into a recording, paced at rising rates, with the default buffers; then the same
//! as fast as it can, in the default and the lossless mode. Writes a real trace file (LZ4,
//! crc) in a temporary folder.
//!
//! `cargo bench -p offtrace-recorder --bench rate` (`-- --seconds 2 --threads 2` to change the
//! run length and the number of emitting threads; each thread runs at the rate).

use std::hint::black_box;
use std::time::{Duration, Instant};

use offtrace_core::*;
use offtrace_recorder::{Config, finish, start_file, subscribe};

/// Emits calls at `rate` per second (0 = as fast as possible) for `seconds`; returns the count.
fn drive(rate: f64, seconds: f64) -> u64 {
    let mut p = ApiCallPayload::new(19, &[0x5555_0000_2000, 0x5555_0000_3000, 1, 0x7ffd_0000_1000]);
    p.has_result = 1;
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let mut n = 0u64;
    const BATCH: u64 = 256;
    loop {
        for _ in 0..BATCH {
            let t = emit_enter(Kind::UrApi, 19, Payload::UrApi(black_box(&p)));
            p.args[3] = p.args[3].wrapping_add(64);
            emit_exit(t, Payload::UrApi(black_box(&p)));
        }
        n += BATCH;
        let now = Instant::now();
        if now >= end {
            return n;
        }
        if rate > 0.0 {
            let due = start + Duration::from_secs_f64(n as f64 / rate);
            while Instant::now() < due {
                std::hint::spin_loop();
            }
        }
    }
}

fn run(config: Config, rate: f64, seconds: f64, threads: usize) -> (u64, u64, f64, u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rate.offtrace");
    start_file(config, &path, &[]).expect("start");
    let ctx = subscribe(false).expect("subscribe");
    let t0 = Instant::now();
    let emitted: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads).map(|_| s.spawn(|| drive(rate, seconds))).collect();
        hs.into_iter().map(|h| h.join().expect("thread")).sum()
    });
    let elapsed = t0.elapsed().as_secs_f64();
    destroy_context(ctx).expect("destroy");
    let stats = finish().expect("finish");
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    (emitted, stats.drops, emitted as f64 / elapsed / threads as f64, bytes)
}

fn main() {
    let mut seconds = 1.0;
    let mut threads = 1;
    let args: Vec<String> = std::env::args().collect();
    for w in args.windows(2) {
        match w[0].as_str() {
            "--seconds" => seconds = w[1].parse().unwrap_or(seconds),
            "--threads" => threads = w[1].parse().unwrap_or(threads),
            _ => {}
        }
    }
    println!("threads={threads} seconds={seconds} ring_words={}", Config::default().ring_words);
    println!(
        "{:>14} {:>10} {:>12} {:>10} {:>16} {:>10}",
        "target M/s/thr", "mode", "emitted", "drops", "achieved M/s/thr", "B/record"
    );
    let rates = [0.5e6, 1e6, 2e6, 3e6, 5e6, 8e6, 0.0];
    for &rate in &rates {
        let (emitted, drops, achieved, bytes) = run(Config::default(), rate, seconds, threads);
        let target = if rate > 0.0 { format!("{:.1}", rate / 1e6) } else { "max".into() };
        println!(
            "{target:>14} {:>10} {emitted:>12} {drops:>10} {:>16.2} {:>10.2}",
            "default",
            achieved / 1e6,
            bytes as f64 / emitted.max(1) as f64
        );
    }
    let (emitted, drops, achieved, bytes) = run(Config::default().with_lossless(true), 0.0, seconds, threads);
    println!(
        "{:>14} {:>10} {emitted:>12} {drops:>10} {:>16.2} {:>10.2}",
        "max",
        "lossless",
        achieved / 1e6,
        bytes as f64 / emitted.max(1) as f64
    );
}
