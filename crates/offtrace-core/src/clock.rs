//! The trace clock: raw ticks on the record path, calibration points to convert them later.
//!
//! On x86-64 with an invariant TSC (`constant_tsc` and `nonstop_tsc` in `/proc/cpuinfo`) a tick
//! is one `rdtsc`; elsewhere it is a `clock_gettime(CLOCK_MONOTONIC)` nanosecond. A writer of
//! raw ticks (the format's clock 1) pairs them with [`ClockSync`] points (ticks, CLOCK_MONOTONIC
//! ns, CLOCK_REALTIME ns) for the reader to convert with. offtrace's recorder does not: the
//! services' timestamps ([`crate::timestamp_ns`]) are already CLOCK_MONOTONIC ns, read from the
//! TSC through a line this module's [`Clock::calibration_pair`] keeps on CLOCK_MONOTONIC.
//!
//! Why the TSC: `rdtsc` costs about half of `clock_gettime(CLOCK_MONOTONIC)` through the vDSO,
//! on bare metal and in VMs with a virtualised TSC alike (`cargo bench -p offtrace-agent --bench
//! notify`, group `clock`, compares the two on the machine at hand). [`Clock::detect`] is cold: it reads
//! `/proc/cpuinfo` and sleeps ~20 ms to calibrate ticks per second; the recorder splits it in
//! [`Clock::detect_source`] (instant, on the application's thread) and
//! [`Clock::calibrated_since`] (the 20 ms wait, on its writer thread).

/// Where raw ticks come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickSource {
    /// `clock_gettime(CLOCK_MONOTONIC)` nanoseconds; one tick = 1 ns.
    Monotonic,
    /// The x86-64 time-stamp counter (invariant).
    Tsc,
}

/// A calibration point relating raw ticks to CLOCK_MONOTONIC and CLOCK_REALTIME nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSync {
    pub ticks: u64,
    pub monotonic_ns: u64,
    pub realtime_ns: u64,
}

/// The trace clock. `Copy`; keep one in a global and call [`Clock::now`] on the record path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    source: TickSource,
    ticks_per_second: u64,
}

/// Whether a `flags` line of `/proc/cpuinfo` advertises an invariant TSC.
pub fn cpuinfo_has_invariant_tsc(cpuinfo: &str) -> bool {
    cpuinfo.lines().find(|l| l.starts_with("flags")).is_some_and(|l| {
        let mut constant = false;
        let mut nonstop = false;
        for f in l.split_whitespace() {
            constant |= f == "constant_tsc";
            nonstop |= f == "nonstop_tsc";
        }
        constant && nonstop
    })
}

fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY:
    // - `ts` is a valid, writable timespec for the duration of the call;
    // - CLOCK_MONOTONIC and CLOCK_REALTIME always exist on Linux, so the call cannot fail.
    #[allow(unsafe_code)]
    unsafe {
        libc::clock_gettime(id, &mut ts);
    }
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds.
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `clock_gettime(CLOCK_REALTIME)` in nanoseconds since the Unix epoch.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` has no preconditions on x86-64 (it is never disabled in user mode on Linux
    // unless a process opts in with PR_SET_TSC, which the detection below does not guard against;
    // such a process would have no invariant TSC worth using anyway).
    #[allow(unsafe_code, unused_unsafe)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(crate) fn rdtsc() -> u64 {
    monotonic_ns()
}

impl Clock {
    /// A CLOCK_MONOTONIC clock (1 tick = 1 ns). Never needs calibration.
    pub const fn monotonic() -> Self {
        Self { source: TickSource::Monotonic, ticks_per_second: 1_000_000_000 }
    }

    /// Chooses the TSC when `/proc/cpuinfo` says it is invariant (and calibrates it over
    /// `~20 ms`), else CLOCK_MONOTONIC. `OFFTRACE_CLOCK=monotonic` is honoured by callers, not here.
    /// Sleeps on the calling thread; a recorder that must not delay the application uses
    /// [`Clock::detect_source`] there and [`Clock::calibrated_since`] on its own thread.
    #[cold]
    #[inline(never)]
    pub fn detect() -> Self {
        let c = Self::detect_source();
        let t0 = Self::paired_sample();
        c.calibrated_since(t0, std::time::Duration::from_millis(20))
    }

    /// The tick source, decided at once from `/proc/cpuinfo` (no waiting): the TSC when it is
    /// invariant, else CLOCK_MONOTONIC. A TSC clock returned here is not calibrated yet
    /// ([`Clock::ticks_per_second`] is 0); [`Clock::now`] already works, so producers can stamp
    /// records while another thread calibrates. Cold.
    #[cold]
    #[inline(never)]
    pub fn detect_source() -> Self {
        if cfg!(target_arch = "x86_64")
            && std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|s| cpuinfo_has_invariant_tsc(&s))
        {
            Self { source: TickSource::Tsc, ticks_per_second: 0 }
        } else {
            Self::monotonic()
        }
    }

    /// (TSC ticks, CLOCK_MONOTONIC ns) read as close together as possible: the start point of a
    /// calibration by [`Clock::calibrated_since`]. Cold.
    #[cold]
    pub fn calibration_start() -> (u64, u64) {
        let (ticks, ns, _) = Self::paired_sample_bracketed();
        (ticks, ns)
    }

    /// [`Clock::calibration_start`] with the width of its TSC bracket in ticks: how far the
    /// CLOCK_MONOTONIC read may lie from the pair's tick value (a thread interrupted between
    /// the reads widens it). Cold.
    #[cold]
    pub fn calibration_pair() -> (u64, u64, u64) {
        Self::paired_sample_bracketed()
    }

    /// This clock with its TSC rate measured from `start` (a [`Clock::calibration_start`]) to
    /// now, sleeping first until at least `span` has passed since `start`. A CLOCK_MONOTONIC
    /// clock is returned as is, at once. Cold: run it on a thread that may wait.
    #[cold]
    pub fn calibrated_since(self, start: (u64, u64), span: std::time::Duration) -> Self {
        if self.source != TickSource::Tsc {
            return self;
        }
        let (t0, m0) = start;
        let elapsed = monotonic_ns().saturating_sub(m0);
        let want = span.as_nanos() as u64;
        if elapsed < want {
            std::thread::sleep(std::time::Duration::from_nanos(want - elapsed));
        }
        let (t1, m1) = Self::paired_sample();
        let dt = t1.wrapping_sub(t0) as u128;
        let dm = m1.saturating_sub(m0).max(1) as u128;
        let tps = (dt * 1_000_000_000 / dm) as u64;
        if tps == 0 {
            return Self::monotonic();
        }
        Self { source: TickSource::Tsc, ticks_per_second: tps }
    }

    /// Measures TSC ticks per second against CLOCK_MONOTONIC over `span`. Cold.
    #[cold]
    pub fn calibrate_tsc(span: std::time::Duration) -> Self {
        let t0 = Self::paired_sample();
        Self { source: TickSource::Tsc, ticks_per_second: 0 }.calibrated_since(t0, span)
    }

    /// (tsc, monotonic ns) read as close together as possible: the pair with the narrowest
    /// TSC bracket out of a few tries.
    fn paired_sample() -> (u64, u64) {
        let (ticks, ns, _) = Self::paired_sample_bracketed();
        (ticks, ns)
    }

    /// (tsc, monotonic ns, bracket width in ticks) of the narrowest of a few tries.
    fn paired_sample_bracketed() -> (u64, u64, u64) {
        let mut best = (u64::MAX, 0, 0);
        for _ in 0..5 {
            let a = rdtsc();
            let m = monotonic_ns();
            let b = rdtsc();
            if b.wrapping_sub(a) < best.0 {
                best = (b.wrapping_sub(a), a + (b.wrapping_sub(a)) / 2, m);
            }
        }
        (best.1, best.2, best.0)
    }

    /// The raw tick counter now. The record-path clock.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        match self.source {
            TickSource::Tsc => rdtsc(),
            TickSource::Monotonic => monotonic_ns(),
        }
    }

    pub fn source(&self) -> TickSource {
        self.source
    }

    pub fn ticks_per_second(&self) -> u64 {
        self.ticks_per_second
    }

    /// A calibration point now (cold path: three clock reads).
    pub fn sync_point(&self) -> ClockSync {
        let ticks = self.now();
        let monotonic_ns = monotonic_ns();
        let realtime_ns = realtime_ns();
        ClockSync { ticks, monotonic_ns, realtime_ns }
    }

    /// Converts raw ticks to CLOCK_MONOTONIC ns using one calibration point (readers prefer
    /// interpolating between the two nearest points).
    pub fn ticks_to_monotonic(&self, ticks: u64, at: &ClockSync) -> u64 {
        let d = ticks as i128 - at.ticks as i128;
        let ns = d * 1_000_000_000 / self.ticks_per_second as i128;
        (at.monotonic_ns as i128 + ns).max(0) as u64
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_flags() {
        assert!(cpuinfo_has_invariant_tsc("vendor\nflags\t: fpu constant_tsc rep_good nonstop_tsc\n"));
        assert!(!cpuinfo_has_invariant_tsc("flags\t: fpu constant_tsc\n"));
        assert!(!cpuinfo_has_invariant_tsc("flags\t: nonstop_tsc\n"));
        assert!(!cpuinfo_has_invariant_tsc(""));
    }

    #[test]
    fn monotonic_is_identity_rate() {
        let c = Clock::monotonic();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        assert_eq!(c.ticks_per_second(), 1_000_000_000);
    }

    /// A (ticks, CLOCK_MONOTONIC) pair bracketed by two monotonic reads, the narrowest of a few
    /// tries, with the bracket's half-width: what the tests compare against, so that a thread
    /// preempted between two reads widens the tolerance instead of failing the test.
    fn bracketed(c: &Clock) -> (ClockSync, u64) {
        let mut best = (u64::MAX, ClockSync { ticks: 0, monotonic_ns: 0, realtime_ns: 0 });
        for _ in 0..20 {
            let a = monotonic_ns();
            let t = c.now();
            let b = monotonic_ns();
            if b - a < best.0 {
                best = (b - a, ClockSync { ticks: t, monotonic_ns: a + (b - a) / 2, realtime_ns: 0 });
            }
        }
        (best.1, best.0 / 2 + 1)
    }

    /// Ticks converted with the detected rate land on CLOCK_MONOTONIC: within the two brackets'
    /// widths plus 0.1 % of the elapsed time (a 20 ms calibration from bracketed pairs is good
    /// to a few parts per million; the margin covers a VM's clock adjustments).
    #[test]
    fn detected_clock_tracks_monotonic() {
        let c = Clock::detect();
        let (s0, w0) = bracketed(&c);
        std::thread::sleep(std::time::Duration::from_millis(30)); // time passing, not ordering
        let (s1, w1) = bracketed(&c);
        let conv = c.ticks_to_monotonic(s1.ticks, &s0);
        let elapsed = s1.monotonic_ns - s0.monotonic_ns;
        let tolerance = w0 + w1 + elapsed / 1000 + 1000;
        assert!(
            conv.abs_diff(s1.monotonic_ns) <= tolerance,
            "conv {conv} mono {} ±{tolerance} clock {c:?}",
            s1.monotonic_ns
        );
    }

    #[test]
    fn source_now_calibration_later() {
        let t0 = Clock::calibration_start();
        let c = Clock::detect_source();
        let (s0, w0) = bracketed(&c);
        let c = c.calibrated_since(t0, std::time::Duration::from_millis(20));
        assert!(monotonic_ns() - t0.1 >= 20_000_000, "calibrated_since returned before its span");
        assert!(c.ticks_per_second() > 0);
        let (s1, w1) = bracketed(&c);
        let conv = c.ticks_to_monotonic(s1.ticks, &s0);
        let tolerance = w0 + w1 + (s1.monotonic_ns - s0.monotonic_ns) / 1000 + 1000;
        assert!(
            conv.abs_diff(s1.monotonic_ns) <= tolerance,
            "conv {conv} mono {} ±{tolerance} clock {c:?}",
            s1.monotonic_ns
        );
        // A start 10 s in the past and a 5 s span: already past, so no wait. A version that
        // slept the span regardless would take 5 s.
        let (ticks, mono) = Clock::calibration_start();
        let started = std::time::Instant::now();
        let _ = Clock::detect_source()
            .calibrated_since((ticks.wrapping_sub(1), mono - 10_000_000_000), std::time::Duration::from_secs(5));
        assert!(started.elapsed() < std::time::Duration::from_millis(2500));
    }
}
