//! The services' timestamps: TSC-derived where the TSC is invariant, comparable to
//! CLOCK_MONOTONIC, monotonic per thread.

#![allow(clippy::unwrap_used)]

use offtrace_core::clock::{Clock, TickSource, monotonic_ns};
use offtrace_core::*;

/// Over `ms` milliseconds: every timestamp within `tol` ns of a CLOCK_MONOTONIC bracket around
/// it, never below the thread's previous one. Returns the largest distance seen.
fn check(ms: u64, tol: u64) -> u64 {
    let mut last = 0;
    let mut worst = 0;
    let start = monotonic_ns();
    while monotonic_ns() - start < ms * 1_000_000 {
        let m0 = monotonic_ns();
        let t = timestamp_ns();
        let m1 = monotonic_ns();
        assert!(t >= last, "went back: {t} < {last}");
        last = t;
        let dist = m0.saturating_sub(t).max(t.saturating_sub(m1));
        worst = worst.max(dist);
        assert!(dist <= tol, "{m0} <= {t} <= {m1} (±{tol} ns)");
    }
    worst
}

#[test]
fn timestamps_track_clock_monotonic_on_every_thread() {
    let ctx = create_context().unwrap(); // calibrates
    let tsc = Clock::detect_source().source() == TickSource::Tsc;
    assert_eq!(timestamps_from_tsc(), tsc && std::env::var("OFFTRACE_CLOCK").map_or(true, |v| v != "monotonic"));
    // Across refinements (spans double from ~200 µs to 100 ms) and on two threads at once.
    let worst = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2).map(|_| s.spawn(|| check(300, 50_000))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    });
    eprintln!("tsc: {tsc}; worst distance to a CLOCK_MONOTONIC bracket: {worst} ns");
    destroy_context(ctx).unwrap();
}
