//! Timestamps of the services: CLOCK_MONOTONIC nanoseconds (the trace clock's unit), read from
//! the TSC where it is invariant.
//!
//! With an invariant TSC (`offtrace_core::clock` decides, from `/proc/cpuinfo`) and without
//! `OFFTRACE_CLOCK=monotonic`, a timestamp is one `rdtsc` and a fixed-point multiply onto a line
//! fitted to CLOCK_MONOTONIC: `base_ns + (tsc - base_ticks) * mult >> 32`. Elsewhere, and before
//! the first context exists, it is one `clock_gettime(CLOCK_MONOTONIC)` through the vDSO.
//!
//! Calibration is cold and never sleeps: the first context's creation spins ~100 µs between two
//! (TSC, CLOCK_MONOTONIC) pairs for a first rate. After that the line is refined by whichever
//! thread first reads a timestamp past the line's `span` (a rare branch): it takes one more
//! pair, measures the rate from the first pair (so the rate's error shrinks as the baseline
//! grows), and steers the line to meet CLOCK_MONOTONIC at the end of the next span. Spans double
//! from ~200 µs up to one second, then stay there (CLOCK_MONOTONIC is NTP-slewed; the TSC is
//! not). The line is continuous at each refinement, so timestamps stay monotonic per thread; it
//! stays within a few hundred ns of CLOCK_MONOTONIC (tests check 50 µs on a noisy VM).
//!
//! The line is published under a sequence lock (five words on one cache line, read with plain
//! loads): readers never wait, and a reader that races a refinement retries.
//!
//! Cost (`cargo bench -p offtrace-core --bench services`, `services/timestamp`): see
//! `docs/overhead.md` (`## Tracing services`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::clock::{Clock, TickSource, monotonic_ns, rdtsc};

/// The TSC → CLOCK_MONOTONIC line (see the module docs).
#[repr(align(64))]
struct Line {
    /// 0: no TSC line (timestamps are `clock_gettime`); odd: being replaced; even: consistent.
    seq: AtomicU64,
    base_ticks: AtomicU64,
    base_ns: AtomicU64,
    /// Nanoseconds per tick, 32.32 fixed point.
    mult: AtomicU64,
    /// Ticks after `base_ticks` from which the line is due for refinement.
    span: AtomicU64,
}

#[derive(Clone, Copy, Debug)]
struct Snapshot {
    seq: u64,
    base_ticks: u64,
    base_ns: u64,
    mult: u64,
    span: u64,
}

impl Snapshot {
    /// The line's value at `ticks` (which may precede `base_ticks`: another core's reading).
    #[inline(always)]
    fn at(&self, ticks: u64) -> u64 {
        let d = ticks.wrapping_sub(self.base_ticks) as i64;
        self.base_ns.wrapping_add(((i128::from(d) * i128::from(self.mult)) >> 32) as u64)
    }
}

static LINE: Line = Line {
    seq: AtomicU64::new(0),
    base_ticks: AtomicU64::new(0),
    base_ns: AtomicU64::new(0),
    mult: AtomicU64::new(0),
    span: AtomicU64::new(0),
};

/// The first calibration pair (ticks, ns); its mutex also elects the one refining thread.
static ORIGIN: Mutex<Option<(u64, u64)>> = Mutex::new(None);
static INIT: std::sync::Once = std::sync::Once::new();

/// The first rate's window.
const FIRST_WINDOW_NS: u64 = 100_000;
/// The longest span between refinements.
const MAX_SPAN_NS: u64 = 1_000_000_000;

/// CLOCK_MONOTONIC now, in nanoseconds (from the TSC where usable, see the module docs).
#[inline]
pub fn timestamp_ns() -> u64 {
    // Acquire / fence(Acquire) / Relaxed: the sequence lock's read side (crossbeam's seqlock);
    // on x86-64 all plain loads.
    let seq = LINE.seq.load(Ordering::Acquire);
    if seq == 0 {
        return monotonic_ns();
    }
    let base_ticks = LINE.base_ticks.load(Ordering::Relaxed);
    let base_ns = LINE.base_ns.load(Ordering::Relaxed);
    let mult = LINE.mult.load(Ordering::Relaxed);
    let span = LINE.span.load(Ordering::Relaxed);
    let t = rdtsc();
    fence(Ordering::Acquire);
    // Signed: a line may take over slightly ahead of now (see `refine`), and another core's
    // TSC reading may precede `base_ticks` by a few ticks.
    let d = t.wrapping_sub(base_ticks) as i64;
    if (LINE.seq.load(Ordering::Relaxed) ^ seq) | (seq & 1) != 0 || d >= span as i64 {
        return slow();
    }
    base_ns.wrapping_add(((i128::from(d) * i128::from(mult)) >> 32) as u64)
}

/// Whether [`timestamp_ns`] reads the TSC (`false`: `clock_gettime`, or no context yet).
pub fn timestamps_from_tsc() -> bool {
    LINE.seq.load(Ordering::Relaxed) != 0
}

fn snapshot() -> Option<Snapshot> {
    let seq = LINE.seq.load(Ordering::Acquire);
    let s = Snapshot {
        seq,
        base_ticks: LINE.base_ticks.load(Ordering::Relaxed),
        base_ns: LINE.base_ns.load(Ordering::Relaxed),
        mult: LINE.mult.load(Ordering::Relaxed),
        span: LINE.span.load(Ordering::Relaxed),
    };
    fence(Ordering::Acquire);
    (seq != 0 && seq & 1 == 0 && LINE.seq.load(Ordering::Relaxed) == seq).then_some(s)
}

/// The sequence lock's write side; callers hold `ORIGIN`'s lock (one writer).
fn publish(base_ticks: u64, base_ns: u64, mult: u64, span: u64) {
    let seq = LINE.seq.load(Ordering::Relaxed);
    // Relaxed + fence(Release): readers that see the odd value (or any new field) retry.
    LINE.seq.store(seq + 1, Ordering::Relaxed);
    fence(Ordering::Release);
    LINE.base_ticks.store(base_ticks, Ordering::Relaxed);
    LINE.base_ns.store(base_ns, Ordering::Relaxed);
    LINE.mult.store(mult, Ordering::Relaxed);
    LINE.span.store(span, Ordering::Relaxed);
    // Release: the fields above happen-before a reader's Acquire of the new even value.
    LINE.seq.store(seq + 2, Ordering::Release);
}

#[cold]
#[inline(never)]
fn slow() -> u64 {
    for _ in 0..1000 {
        let Some(s) = snapshot() else {
            std::hint::spin_loop();
            continue;
        };
        let t = rdtsc();
        let d = t.wrapping_sub(s.base_ticks) as i64;
        if d >= 0 && d as u64 >= s.span && refine(&s) {
            continue; // read the new line
        }
        return s.at(t);
    }
    // A refining thread preempted mid-publish for this long: the kernel's clock is right too.
    monotonic_ns()
}

/// ns per tick in 32.32 fixed point from `dns` nanoseconds over `dticks` ticks.
fn rate(dns: u64, dticks: u64) -> u64 {
    ((u128::from(dns) << 32) / u128::from(dticks.max(1))) as u64
}

/// Refines the line `s` (see the module docs). `true` when a new line is published (by this
/// thread or another); `false` when another thread is refining it now.
#[cold]
#[inline(never)]
fn refine(s: &Snapshot) -> bool {
    let Ok(origin) = ORIGIN.try_lock() else { return false };
    if LINE.seq.load(Ordering::Relaxed) != s.seq {
        return true;
    }
    let Some((ta, ma)) = *origin else { return false };
    let (tc, mc) = Clock::calibration_start();
    let (dt, dm) = (tc.wrapping_sub(ta), mc.saturating_sub(ma));
    if dt == 0 || dm == 0 || (dt as i64) < 0 {
        return false;
    }
    let true_mult = rate(dm, dt);
    // Next span: as long as the baseline so far (the rate's error halves each time), at most
    // MAX_SPAN_NS.
    let max_span = ((u128::from(MAX_SPAN_NS) << 32) / u128::from(true_mult.max(1))) as u64;
    let span = dt.min(max_span).max(1);
    // The line must meet CLOCK_MONOTONIC at (tc + span, mc + span * true rate) and be continuous
    // where it takes over. Slowing down, it takes over a quarter span ahead (past any reading
    // of the old line that a late reader still computes): per-thread monotonicity holds either way.
    let target_ticks = tc.wrapping_add(span);
    let target_ns = mc.wrapping_add(((u128::from(span) * u128::from(true_mult)) >> 32) as u64);
    let v = s.at(tc);
    if v.wrapping_add(1_000_000) < mc {
        // Behind by over 1 ms (suspend, or a bad first rate): jump forward (monotonic still).
        publish(tc, mc, true_mult, span);
        return true;
    }
    let steer = |anchor: u64| -> u64 {
        let va = s.at(anchor);
        let m = rate(target_ns.saturating_sub(va), target_ticks.wrapping_sub(anchor));
        m.clamp(true_mult / 2, true_mult.saturating_mul(2))
    };
    let mut anchor = tc;
    let mut mult = steer(anchor);
    if mult < s.mult {
        anchor = tc.wrapping_add(span / 4);
        mult = steer(anchor);
    }
    publish(anchor, s.at(anchor), mult, target_ticks.wrapping_sub(anchor).max(1));
    true
}

/// Calibrates the TSC line once (cold: the first context's creation). Spins ~100 µs; never
/// sleeps. Honours `OFFTRACE_CLOCK=monotonic` (no TSC line: `clock_gettime`).
#[cold]
#[inline(never)]
pub(crate) fn init() {
    INIT.call_once(|| {
        if std::env::var("OFFTRACE_CLOCK").is_ok_and(|v| v == "monotonic") {
            return;
        }
        if Clock::detect_source().source() != TickSource::Tsc {
            return;
        }
        let (ta, ma) = Clock::calibration_start();
        while monotonic_ns().saturating_sub(ma) < FIRST_WINDOW_NS {
            std::hint::spin_loop();
        }
        let (tb, mb) = Clock::calibration_start();
        let (dt, dm) = (tb.wrapping_sub(ta), mb.saturating_sub(ma));
        if dt == 0 || (dt as i64) < 0 || dm == 0 {
            return; // a TSC that does not advance: keep clock_gettime
        }
        let mut origin = ORIGIN.lock().unwrap_or_else(|e| e.into_inner());
        *origin = Some((ta, ma));
        publish(tb, mb, rate(dm, dt), dt.saturating_mul(2));
    });
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn line_is_continuous_and_close_to_monotonic() {
        init();
        let mut last = 0;
        let start = monotonic_ns();
        // Long enough for several refinements (spans double from ~200 µs).
        while monotonic_ns() - start < 20_000_000 {
            let m0 = monotonic_ns();
            let t = timestamp_ns();
            let m1 = monotonic_ns();
            assert!(t >= last, "went back: {t} < {last}");
            last = t;
            assert!(t + 50_000 >= m0 && t <= m1 + 50_000, "{m0} <= {t} <= {m1} (±50 µs)");
        }
    }

    #[test]
    fn snapshot_at_handles_earlier_ticks() {
        let s = Snapshot { seq: 2, base_ticks: 1000, base_ns: 5000, mult: 1 << 31, span: 100 };
        assert_eq!(s.at(1000), 5000);
        assert_eq!(s.at(1100), 5050);
        assert_eq!(s.at(900), 4950);
        assert_eq!(s.at(999), 4999); // rounds toward earlier: still monotonic
    }
}
