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
//! thread first reads a timestamp past the line's `span` (a rare branch; the recorder's writer
//! reads one each cycle, so a quiet program's line is refined on time too): it takes one more
//! pair and measures the rate from the first pair (so the rate's error shrinks as the baseline
//! grows). A line found behind CLOCK_MONOTONIC steps forward onto it; one found ahead runs
//! 12.5 % slow until it is back on it (time never steps back on a thread). Spans double from
//! ~200 µs up to 100 ms, then stay there (CLOCK_MONOTONIC is NTP-slewed; the TSC is not).
//!
//! Why this matters: device times (an OpenCL profiling query, CUPTI's activity records) are
//! converted onto CLOCK_MONOTONIC, and a queue wait is a device start minus a host time from
//! here: a host time ahead of CLOCK_MONOTONIC reads as a negative wait. A line that was steered
//! back slowly over a one-second span, after a quiet spell had extrapolated the first rate,
//! was tens of µs off for a second (`cargo bench -p offtrace-core --bench timestamp_error`
//! measures it; numbers in `docs/overhead.md`, `## Timestamp accuracy`, and the line before this
//! one in `docs/history/overhead-timestamps-rounds-to-s11.md`).
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
/// The longest span between refinements: the line's error at its end is the TSC's rate error
/// against CLOCK_MONOTONIC times this (NTP slews CLOCK_MONOTONIC; the TSC runs free).
const MAX_SPAN_NS: u64 = 100_000_000;
/// A line ahead of CLOCK_MONOTONIC runs this fraction (1 / divisor) slower than the TSC's true
/// rate until it is back on it: an error `e` is gone `8 e` later, and durations measured
/// meanwhile read 12.5 % short (a 50 ns error: 400 ns of it).
const SLEW_DIVISOR: u64 = 8;
/// A slower line takes over this many ticks (30–250 ns at 1–4 GHz) after the TSC reading that
/// follows its announcement (see [`publish_at_now`]): past what a reader of the old line can
/// have computed. Before it, the slower line lies above the old one by up to an eighth of
/// this (≤ 32 ticks): the error it adds.
const TAKEOVER_MARGIN_TICKS: u64 = 256;

/// CLOCK_MONOTONIC now, in nanoseconds (from the TSC where usable, see the module docs).
#[inline]
pub fn timestamp_ns() -> u64 {
    // Acquire / fence(Acquire) / Relaxed: the sequence lock's read side (crossbeam's seqlock);
    // on x86-64 all plain loads.
    let seq = LINE.seq.load(Ordering::Acquire);
    if seq == 0 {
        // No TSC line: no `rdtsc` (where the TSC is not used it may be slow, or trap).
        return monotonic_ns();
    }
    let base_ticks = LINE.base_ticks.load(Ordering::Relaxed);
    let base_ns = LINE.base_ns.load(Ordering::Relaxed);
    let mult = LINE.mult.load(Ordering::Relaxed);
    let span = LINE.span.load(Ordering::Relaxed);
    let t = rdtsc();
    fence(Ordering::Acquire);
    // Unsigned: a reading before `base_ticks` (a line that takes over slightly ahead of now,
    // see `refine`, or another core's TSC a few ticks behind) is a huge value and goes to
    // `slow`, which computes it signed. Below `span` the product fits 64 bits (`publish`
    // bounds the span), so the conversion is one multiply and one shift instead of a signed
    // 128-bit product.
    let d = t.wrapping_sub(base_ticks);
    // A line being replaced, or replaced since `seq` (`torn` non-zero, and small: a count),
    // sets `d`'s top bit, above every span (`span_bound`): one compare for both tests.
    let torn = (LINE.seq.load(Ordering::Relaxed) ^ seq) | (seq & 1);
    if d | torn.wrapping_neg() >= span {
        return slow();
    }
    base_ns.wrapping_add(d.wrapping_mul(mult) >> 32)
}

/// The longest span [`publish`] lets a line have at `mult`: below it, `d * mult` (the fast
/// path's product, `d < span`) fits 64 bits, and `span` is below 2^63 (a torn read's mark).
/// Lines span at most [`MAX_SPAN_NS`] (2^32 ns is 43 times that), so this only guards against
/// a rate or span gone wrong.
fn span_bound(mult: u64) -> u64 {
    (u64::MAX / mult.max(1)).min(i64::MAX as u64)
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
    LINE.span.store(span.min(span_bound(mult)), Ordering::Relaxed);
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
    publish_at_now(|now| next_line(s, (tc, mc), true_mult, dt, now));
    true
}

/// [`publish`] of the line that `make` returns for `now`, a TSC reading taken once every
/// reader sees the line as being replaced: a reader that still completes on the old line read
/// its TSC before `now` (give or take the out-of-order window and the cores' TSC skew, which
/// [`TAKEOVER_MARGIN_TICKS`] covers).
fn publish_at_now(make: impl FnOnce(u64) -> Snapshot) {
    let seq = LINE.seq.load(Ordering::Relaxed);
    LINE.seq.store(seq + 1, Ordering::Relaxed);
    // SeqCst (mfence on x86-64): the odd value is globally visible before the TSC read.
    fence(Ordering::SeqCst);
    let line = make(rdtsc());
    LINE.base_ticks.store(line.base_ticks, Ordering::Relaxed);
    LINE.base_ns.store(line.base_ns, Ordering::Relaxed);
    LINE.mult.store(line.mult, Ordering::Relaxed);
    LINE.span.store(line.span.min(span_bound(line.mult)), Ordering::Relaxed);
    // Release: the fields above happen-before a reader's Acquire of the new even value.
    LINE.seq.store(seq + 2, Ordering::Release);
}

/// The line that replaces `s` once CLOCK_MONOTONIC was read at `pair` (ticks, ns):
/// `true_mult` is the TSC's rate over the whole run so far (`baseline` ticks), `now` the TSC
/// read once the replacement is announced (no reader of `s` computed a value for a later TSC
/// reading, to [`TAKEOVER_MARGIN_TICKS`]: the seqlock makes it retry). The result's `seq` is
/// meaningless.
///
/// Every thread's timestamps stay monotonic (to the rounding of one ns, as with any two lines),
/// and the error against CLOCK_MONOTONIC is removed at once or within a few times itself,
/// however stale `s` is (a program quiet for a second after its first context extrapolates
/// the first ~100 µs rate that long):
///
/// - `s` behind CLOCK_MONOTONIC at `now`: the new line is CLOCK_MONOTONIC from `now` on, a
///   forward step.
/// - `s` ahead (or on it): time cannot step back, so the new line continues `s` from a little
///   after `now` ([`TAKEOVER_MARGIN_TICKS`]: the cores' TSCs may differ by a few ticks) at
///   [`SLEW_DIVISOR`]'s fraction below the true rate until it meets CLOCK_MONOTONIC, 8 × its
///   error later; the next call past that span refines again, onto CLOCK_MONOTONIC.
fn next_line(s: &Snapshot, pair: (u64, u64), true_mult: u64, baseline: u64, now: u64) -> Snapshot {
    let (tc, mc) = pair;
    let truth = |ticks: u64| -> u64 {
        let d = ticks.wrapping_sub(tc) as i64;
        mc.wrapping_add(((i128::from(d) * i128::from(true_mult)) >> 32) as u64)
    };
    let ticks_for = |ns: u64| ((u128::from(ns) << 32) / u128::from(true_mult.max(1))).min(u128::from(u64::MAX)) as u64;
    // Spans as long as the baseline so far (the rate's error halves with each), at most
    // MAX_SPAN_NS: CLOCK_MONOTONIC is NTP-slewed, the TSC is not.
    let max_span = ticks_for(MAX_SPAN_NS).max(1);
    let span = baseline.clamp(1, max_span);
    if s.at(now) < truth(now) {
        return Snapshot { seq: 0, base_ticks: now, base_ns: truth(now), mult: true_mult, span };
    }
    let anchor = now.wrapping_add(TAKEOVER_MARGIN_TICKS);
    let from = s.at(anchor);
    let ahead = from.saturating_sub(truth(anchor));
    // Never faster than `s`: a reader of `s` just before `anchor` must not get more than the
    // new line gives a later reading.
    let slow_mult = (true_mult - true_mult / SLEW_DIVISOR).min(s.mult);
    let gain_per_tick = true_mult - slow_mult; // ns the truth gains per tick, 32.32
    let catch_up = ((u128::from(ahead) << 32) / u128::from(gain_per_tick.max(1))).min(u128::from(max_span)) as u64;
    // A long catch-up is cut at the longest span: the refinement there continues it.
    Snapshot { seq: 0, base_ticks: anchor, base_ns: from, mult: slow_mult, span: catch_up.max(1) }
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

    /// The tests that move the process's one line: one at a time under `cargo test`.
    static LINE_TESTS: Mutex<()> = Mutex::new(());

    /// The narrowest of a few `CLOCK_MONOTONIC, timestamp_ns(), CLOCK_MONOTONIC` brackets:
    /// (timestamp − bracket midpoint, bracket half width).
    fn error_now() -> (i64, u64) {
        let mut best = (0, u64::MAX);
        for _ in 0..20 {
            let m0 = monotonic_ns();
            let t = timestamp_ns();
            let m1 = monotonic_ns();
            if (m1 - m0) / 2 < best.1 {
                best = (t as i64 - (m0 + (m1 - m0) / 2) as i64, (m1 - m0) / 2);
            }
        }
        best
    }

    /// End to end, on the real clocks: a line whose rate is 400 ppm fast and that nobody
    /// refined for 300 ms (a program quiet after its first context) is ~120 µs ahead. The first
    /// timestamp after that refines it; 8 × 120 µs later it is back on CLOCK_MONOTONIC. The
    /// old refinement steered over the next one-second span: still ~115 µs ahead then.
    #[test]
    fn stale_line_is_corrected_within_milliseconds() {
        let _one = LINE_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        init();
        if !timestamps_from_tsc() {
            return; // clock_gettime: nothing to correct
        }
        {
            let _refiner = ORIGIN.lock().unwrap_or_else(|e| e.into_inner());
            let s = snapshot().expect("a line");
            let (tb, mb) = Clock::calibration_start();
            let fast = s.mult + s.mult / 2_500; // +400 ppm
            let span = rate(1 << 32, s.mult).saturating_mul(300_000_000) >> 32; // ~300 ms of ticks
            publish(tb, mb, fast, span);
        }
        std::thread::sleep(std::time::Duration::from_millis(320)); // time passing, not ordering
        let (stale, w) = error_now();
        assert!(stale > 60_000 - w as i64, "the stale line should be ~120 µs ahead: {stale} ± {w} ns");
        std::thread::sleep(std::time::Duration::from_millis(5)); // > 8 × 120 µs
        let (after, w) = error_now();
        assert!(after.unsigned_abs() <= w + 2_000, "still {after} ± {w} ns off 5 ms after the refinement");
    }

    #[test]
    fn line_is_continuous_and_close_to_monotonic() {
        let _one = LINE_TESTS.lock().unwrap_or_else(|e| e.into_inner());
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

    /// 2.5 GHz: 0.4 ns per tick in 32.32 fixed point.
    const TRUE_MULT: u64 = (4 << 32) / 10;
    const GHZ_TICKS_PER_S: u64 = 2_500_000_000;

    fn truth(ticks: u64) -> u64 {
        1_000_000_000 + ((u128::from(ticks) * u128::from(TRUE_MULT)) >> 32) as u64
    }

    /// The first line (base 0 = 1 s), its rate off by `ppm`, refined after `stale_s` seconds
    /// against the truth.
    fn stale_line(ppm: i64, stale_s: u64) -> (Snapshot, Snapshot, u64) {
        let mult = (TRUE_MULT as i128 + TRUE_MULT as i128 * i128::from(ppm) / 1_000_000) as u64;
        let old = Snapshot { seq: 2, base_ticks: 0, base_ns: 1_000_000_000, mult, span: 500_000 };
        let tc = stale_s * GHZ_TICKS_PER_S;
        let now = tc + 1_000;
        let new = next_line(&old, (tc, truth(tc)), TRUE_MULT, tc, now);
        (old, new, now)
    }

    /// A rate 400 ppm fast, extrapolated for a second: 400 µs ahead. The new line continues the
    /// old one after `now`, above it before (no thread sees time go back), and is back on
    /// CLOCK_MONOTONIC at its span's end, within 8 × 400 µs. The old refinement steered over the
    /// whole next span (1 s), still ~398 µs ahead 3.2 ms later.
    #[test]
    fn stale_line_ahead_slews_back_within_eight_times_its_error() {
        let (old, new, now) = stale_line(400, 1);
        let ahead = old.at(now) - truth(now);
        assert!((399_000..=401_000).contains(&ahead), "{ahead}");
        assert!(new.base_ticks > now);
        assert_eq!(new.at(new.base_ticks), old.at(new.base_ticks), "continuous at the takeover");
        assert!(new.at(now) >= old.at(now), "a reader of the old line at `now` would see time go back");
        assert!(new.mult < TRUE_MULT);
        let end = new.base_ticks + new.span;
        assert!(new.at(end).abs_diff(truth(end)) <= 2, "{} vs {}", new.at(end), truth(end));
        let catch_up_ns = ((u128::from(new.span) * u128::from(TRUE_MULT)) >> 32) as u64;
        assert!(catch_up_ns <= 8 * ahead + 8, "{catch_up_ns} ns to remove {ahead} ns");
        // The refinement at the span's end finds it on the truth and stays there.
        let next = next_line(&new, (end, truth(end)), TRUE_MULT, end, end + 1_000);
        let later = end + 50_000_000; // 20 ms on
        assert!(next.at(later).abs_diff(truth(later)) <= 2);
    }

    /// A rate 400 ppm slow: 400 µs behind after a second; the new line steps forward onto
    /// CLOCK_MONOTONIC at once.
    #[test]
    fn stale_line_behind_steps_onto_monotonic() {
        let (old, new, now) = stale_line(-400, 1);
        assert!(truth(now) - old.at(now) >= 399_000);
        for t in [now, now + 1_000_000, now + new.span] {
            assert!(new.at(t).abs_diff(truth(t)) <= 2, "at {t}: {} vs {}", new.at(t), truth(t));
            assert!(new.at(t) >= old.at(t));
        }
        assert_eq!(new.mult, TRUE_MULT);
    }

    /// Every error, ahead or behind, small or large, and every staleness: the line meets the
    /// truth by its span's end (or slews at the full 12.5 % until then), never drops below the
    /// old line for a reader that took it before `now`, and spans are at most 100 ms.
    #[test]
    fn refinements_converge_for_any_drift() {
        let max_span = ((u128::from(MAX_SPAN_NS) << 32) / u128::from(TRUE_MULT)) as u64;
        for ppm in [-5_000, -400, -20, -1, 0, 1, 3, 20, 400, 5_000] {
            for stale_s in [1, 2, 10] {
                let (old, new, now) = stale_line(ppm, stale_s);
                assert!(new.span >= 1 && new.span <= max_span, "ppm {ppm}: span {}", new.span);
                // To the rounding of one ns where old and new lines are the same (0 ppm).
                assert!(new.at(now) + 1 >= old.at(now), "ppm {ppm} stale {stale_s}: back in time");
                let end = new.base_ticks + new.span;
                let before = old.at(now).abs_diff(truth(now));
                let after = new.at(end).abs_diff(truth(end));
                assert!(after <= 2 || after < before, "ppm {ppm} stale {stale_s}: {before} -> {after} ns");
            }
        }
    }

    /// A reading before the line's base (a line that takes over ahead of now, or another
    /// core's TSC a few ticks behind) is the line extended back, below its base: the fast path
    /// sends it to `slow` (its unsigned difference is huge), which computes it signed.
    #[test]
    fn a_reading_before_the_base_is_the_line_extended_back() {
        let _one = LINE_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        init();
        if !timestamps_from_tsc() {
            return; // clock_gettime: no line
        }
        let _refiner = ORIGIN.lock().unwrap_or_else(|e| e.into_inner());
        let s = snapshot().expect("a line");
        let (tb, mb) = Clock::calibration_start();
        let ahead = 1u64 << 28; // 67-268 ms at 1-4 GHz
        let base_ns = mb + 100_000_000;
        publish(tb + ahead, base_ns, s.mult, s.span);
        let t = timestamp_ns();
        publish(s.base_ticks, s.base_ns, s.mult, s.span);
        let back = ((u128::from(ahead) * u128::from(s.mult)) >> 32) as u64;
        // The line's value at the reading: `back` below the base plus the time since `tb`
        // (microseconds; up to 50 ms for a preempted test thread, less than `back`).
        let since = (t + back).checked_sub(base_ns);
        assert!(since.is_some_and(|e| e <= 50_000_000), "{t}: expected {back} ns below the base {base_ns} (+ < 50 ms)");
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
