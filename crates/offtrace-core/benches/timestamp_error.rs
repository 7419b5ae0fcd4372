//! How far the services' timestamps ([`offtrace_core::timestamp_ns`], TSC-derived) stray from
//! CLOCK_MONOTONIC over a run: the error a host time carries against device times that the
//! backends convert onto CLOCK_MONOTONIC (an OpenCL completion, a CUPTI activity).
//!
//! `cargo bench -p offtrace-core --bench timestamp_error -- [seconds] [idle_ms]` (defaults 5
//! and 0): samples `m0 = CLOCK_MONOTONIC, t = timestamp_ns(), m1 = CLOCK_MONOTONIC` back to back;
//! with `idle_ms` > 0 the process first sleeps `idle_ms` after creating its context (a program
//! that loads the tracer, then imports for a while) and then alternates 20 ms of samples with
//! `idle_ms` of sleep (an application that calls the runtime in bursts), so that the line is
//! refined late, by whichever call comes first after a quiet spell, as in a real program. A
//! third number `1` adds a thread that reads a timestamp every 100 ms, as the recorder's writer
//! does each cycle (the line is then refined on time whatever the program does). Keeps the samples whose bracket `m1 - m0` is under 200 ns (a thread preempted between
//! the reads says nothing about the line), and prints the error `t - (m0 + m1) / 2` (p50, p99,
//! max of its magnitude, most negative and most positive) overall and per second of the run.
//! Also prints the TSC's rate against CLOCK_MONOTONIC over successive 100 ms windows (ppm from
//! the run's mean): the drift a line extrapolating a rate has to follow.

use offtrace_core::clock::{Clock, TickSource, monotonic_ns};
use offtrace_core::{create_context, destroy_context, timestamp_ns, timestamps_from_tsc};

/// Brackets wider than this are preemptions, not measurements.
const MAX_BRACKET_NS: u64 = 200;

struct Sample {
    at_ns: u64,
    err_ns: i64,
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn summary(label: &str, samples: &[Sample]) {
    let mut mag: Vec<u64> = samples.iter().map(|s| s.err_ns.unsigned_abs()).collect();
    mag.sort_unstable();
    let lo = samples.iter().map(|s| s.err_ns).min().unwrap_or(0);
    let hi = samples.iter().map(|s| s.err_ns).max().unwrap_or(0);
    println!(
        "{label:>10}  n {:>8}  |err| p50 {:>5} ns  p99 {:>5} ns  max {:>5} ns  (signed {lo} .. {hi})",
        samples.len(),
        percentile(&mag, 0.5),
        percentile(&mag, 0.99),
        mag.last().copied().unwrap_or(0),
    );
}

fn main() {
    let numbers: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let seconds = numbers.first().copied().unwrap_or(5);
    let idle_ms = numbers.get(1).copied().unwrap_or(0);
    let refresher = numbers.get(2).is_some_and(|&n| n == 1);
    let Ok(ctx) = create_context() else {
        eprintln!("no context");
        return;
    };
    if !timestamps_from_tsc() || Clock::detect_source().source() != TickSource::Tsc {
        println!("timestamps come from clock_gettime here: no error to measure");
        return;
    }
    let start = monotonic_ns();
    let end = start + seconds * 1_000_000_000;
    if refresher {
        std::thread::spawn(move || {
            while monotonic_ns() < end {
                std::hint::black_box(timestamp_ns());
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        });
    }
    let idle = std::time::Duration::from_millis(idle_ms);
    std::thread::sleep(idle);
    let mut burst_end = monotonic_ns() + 20_000_000;
    let mut samples = Vec::with_capacity(1 << 20);
    let mut pairs = Vec::new();
    let mut next_pair = start;
    loop {
        let m0 = monotonic_ns();
        let t = timestamp_ns();
        let m1 = monotonic_ns();
        if m0 >= end {
            break;
        }
        if m1 - m0 < MAX_BRACKET_NS {
            let mid = m0 + (m1 - m0) / 2;
            samples.push(Sample { at_ns: mid - start, err_ns: t as i64 - mid as i64 });
        }
        if idle_ms > 0 && m1 >= burst_end {
            std::thread::sleep(idle);
            burst_end = monotonic_ns() + 20_000_000;
        }
        if m0 >= next_pair {
            pairs.push(Clock::calibration_start());
            next_pair += 100_000_000;
        }
    }
    destroy_context(ctx).ok();
    let mut widths: Vec<u64> = (0..100_000).map(|_| Clock::calibration_pair().2).collect();
    widths.sort_unstable();

    println!(
        "timestamp_ns() - CLOCK_MONOTONIC over {seconds} s, idle {idle_ms} ms between 20 ms bursts, refresher {refresher} (brackets < {MAX_BRACKET_NS} ns):"
    );
    summary("all", &samples);
    for s in 0..seconds {
        let lo = s * 1_000_000_000;
        let hi = lo + 1_000_000_000;
        let part: Vec<Sample> = samples
            .iter()
            .filter(|x| (lo..hi).contains(&x.at_ns))
            .map(|x| Sample { at_ns: x.at_ns, err_ns: x.err_ns })
            .collect();
        summary(&format!("{s}-{} s", s + 1), &part);
    }
    if let (Some(first), Some(last)) = (pairs.first(), pairs.last()) {
        let mean = (last.0 - first.0) as f64 / (last.1 - first.1) as f64;
        let ppm: Vec<String> = pairs
            .windows(2)
            .map(|w| {
                let r = (w[1].0 - w[0].0) as f64 / (w[1].1 - w[0].1) as f64;
                format!("{:+.2}", (r / mean - 1.0) * 1e6)
            })
            .collect();
        println!(
            "calibration pair bracket, ticks: p50 {} p99 {} p99.9 {} max {}",
            percentile(&widths, 0.5),
            percentile(&widths, 0.99),
            percentile(&widths, 0.999),
            widths.last().copied().unwrap_or(0)
        );
        println!("TSC rate per 100 ms window, ppm from the run's mean ({:.3} ticks/ns): {}", mean, ppm.join(" "));
    }
}
