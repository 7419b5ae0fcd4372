//! [`Timebase`]: raw clock ticks → CLOCK_MONOTONIC nanoseconds, in file order.
//!
//! Writers store timestamps as raw ticks of the header's clock; every reader converts them with
//! the latest calibration point (the header's start point, then each [`Record::ClockSync`] in
//! file order). This is the one place that knows which records carry a timestamp, so the
//! sequential [`crate::TraceReader`] and the parallel [`crate::TraceRecords`] convert alike.

use crate::header::TraceHeader;
use crate::record::{ClockSource, Record};

/// The calibration state of one pass over a trace.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timebase {
    clock: ClockSource,
    sync_ticks: u64,
    sync_ns: u64,
    ns_per_tick: f64,
}

impl Timebase {
    pub fn new(header: &TraceHeader) -> Self {
        Self {
            clock: header.clock,
            sync_ticks: header.start_ticks,
            sync_ns: header.start_monotonic_ns,
            ns_per_tick: 1e9 / header.ticks_per_second,
        }
    }

    /// Converts raw ticks with the current calibration point (saturating at 0 and `u64::MAX`).
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        match self.clock {
            ClockSource::Monotonic => ticks,
            ClockSource::Tsc => {
                let delta = i128::from(ticks) - i128::from(self.sync_ticks);
                // f64 → i128 `as` saturates and maps NaN to 0: no panic on any header.
                let ns_delta = (delta as f64 * self.ns_per_tick).round() as i128;
                let ns = i128::from(self.sync_ns).saturating_add(ns_delta);
                ns.clamp(0, i128::from(u64::MAX)) as u64
            }
        }
    }

    /// Converts the timestamps of `record` in place, or takes its calibration point. Records
    /// must come in file order.
    pub fn convert(&mut self, record: &mut Record) {
        match record {
            Record::ClockSync { ticks, monotonic_ns, .. } => {
                self.sync_ticks = *ticks;
                self.sync_ns = *monotonic_ns;
            }
            other => {
                let tb = *self;
                other.map_host_times(|t| tb.ticks_to_ns(t));
            }
        }
    }

    /// Whether conversion is the identity (a monotonic-clock trace): callers may skip it.
    pub fn is_identity(&self) -> bool {
        self.clock == ClockSource::Monotonic
    }
}
