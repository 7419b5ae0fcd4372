//! Size statistics of a trace file: bytes per record on disk and before LZ4, by record kind.
//!
//! `cargo run -p offtrace-format --example trace_stats -- FILE...`

use offtrace_format::{Record, TraceReader, UserData};

fn main() {
    for path in std::env::args().skip(1) {
        let scan = match TraceReader::summary_scan(&path) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{path}: {e}");
                continue;
            }
        };
        let (mut notifications, mut fwa, mut args, mut other) = (0u64, 0u64, 0u64, 0u64);
        let mut reader = match TraceReader::open(&path) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{path}: {e}");
                continue;
            }
        };
        let mut error = None;
        for item in reader.by_ref() {
            match item {
                Ok(Record::Notification(n)) => {
                    notifications += 1;
                    if let UserData::FunctionWithArgs { args: a, .. } = n.user_data {
                        fwa += 1;
                        args += a.as_slice().len() as u64;
                    }
                }
                Ok(_) => other += 1,
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        let records = notifications + other;
        let per = |bytes: u64| bytes as f64 / records.max(1) as f64;
        println!("{path}:");
        println!(
            "  {records} records: {notifications} notifications ({fwa} function_with_args, {:.1} args each), {other} other",
            args as f64 / fwa.max(1) as f64
        );
        println!(
            "  {} bytes in {} chunks: {:.2} bytes/record on disk, {:.2} encoded before LZ4, LZ4 ratio {:.2}x",
            scan.file_bytes,
            scan.chunks,
            per(scan.file_bytes),
            per(scan.raw_bytes),
            scan.raw_bytes as f64 / scan.stored_bytes.max(1) as f64
        );
        println!("  finished cleanly: {}", reader.finished_cleanly());
        if let Some(e) = error {
            println!("  {e}");
        }
    }
}
