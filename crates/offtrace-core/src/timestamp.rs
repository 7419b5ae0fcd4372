//! Timestamps of the services: CLOCK_MONOTONIC nanoseconds (the trace clock's unit).
//!
//! One `clock_gettime` through the vDSO (~20 ns): taken only when a buffer service wants a record
//! or a tool asks (`offtrace_get_timestamp`), never on the disabled path.

/// CLOCK_MONOTONIC now, in nanoseconds.
#[inline]
pub fn timestamp_ns() -> u64 {
    crate::clock::monotonic_ns()
}
