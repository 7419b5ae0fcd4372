//! Encode/decode throughput, without criterion (keeps the lockfile untouched). Run with
//! `cargo test -p offtrace-format --release --test throughput -- --ignored --nocapture`.

mod common;
use common::*;
use offtrace_format::*;
use std::time::Instant;

#[test]
#[ignore = "timing: run in release"]
fn write_and_read_throughput() {
    let records = synthetic_sycl_trace(20_000, 11);
    let notifications: Vec<Notification> =
        records.iter().filter_map(|r| if let Record::Notification(n) = r { Some(**n) } else { None }).collect();
    let rounds = 5;
    let mut best_write = f64::MAX;
    let mut bytes = Vec::new();
    for _ in 0..rounds {
        let mut w = TraceWriter::new(Vec::with_capacity(8 << 20), &tsc_header()).expect("header");
        let t = Instant::now();
        for (i, n) in notifications.iter().enumerate() {
            w.write_notification(n).expect("write");
            if i % 3000 == 2999 {
                w.flush_chunk().expect("flush");
            }
        }
        w.flush_chunk().expect("flush");
        best_write = best_write.min(t.elapsed().as_secs_f64());
        bytes = w.finish().expect("finish");
    }
    let mut best_read = f64::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        let n = TraceReader::new(&bytes[..]).expect("header").filter(Result::is_ok).count();
        best_read = best_read.min(t.elapsed().as_secs_f64());
        assert_eq!(n, notifications.len() + 1);
    }
    let n = notifications.len() as f64;
    println!(
        "{} notifications: write (encode + LZ4 + crc, into memory) {:.1} ns/record, read (crc + LZ4 + decode + tick conversion) {:.1} ns/record",
        notifications.len(),
        best_write * 1e9 / n,
        best_read * 1e9 / n
    );
}
