//! Writes a large synthetic typed trace (format 3) of a SYCL-like program, the input of the
//! scale measurements (`docs/overhead.md`, "Reading at scale"): see
//! [`offtrace_analysis::testing::sycl_like`] for what it holds (about 9 records per submit:
//! argument settings, launch with its dispatch, completions, copies, fills, barriers,
//! allocations, task-graph nodes and edges, counter samples), on `--threads` threads with a
//! queue each, written as the recorder writes (monotonic clock, 256 KiB chunks).
//!
//! `cargo run --release -p offtrace-analysis --example synth_typed -- OUT.offtrace RECORDS [--threads N]`

use std::fs::File;
use std::io::BufWriter;

use offtrace_analysis::testing::{TypedBuilder, WriterSink, sycl_like};
use offtrace_format::{Record, TraceHeader, TraceWriter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: synth_typed OUT.offtrace RECORDS [--threads N]");
        std::process::exit(2);
    }
    let target: u64 = args[2].replace('_', "").parse()?;
    let threads: u32 =
        args.iter().position(|a| a == "--threads").and_then(|i| args.get(i + 1)).map_or(Ok(4), |s| s.parse())?;
    let out = BufWriter::with_capacity(1 << 20, File::create(&args[1])?);
    let header = TraceHeader { pid: 4242, ..TraceHeader::monotonic() };
    let writer = TraceWriter::new(out, &header)?;
    let mut b = TypedBuilder::new(WriterSink { writer, error: None, records: 0 });
    let submits = sycl_like(&mut b, threads, target, |s| s.records);
    let records = b.out.records + 1;
    b.out.put_end(Record::End { records, drops: 0 });
    let sink = b.out;
    if let Some(e) = sink.error {
        return Err(e.into());
    }
    sink.writer.finish()?;
    eprintln!("{records} records, {submits} submits on {threads} threads");
    Ok(())
}
