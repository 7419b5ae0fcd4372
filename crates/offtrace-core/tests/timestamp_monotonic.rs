//! `OFFTRACE_CLOCK=monotonic`: the services' timestamps come from `clock_gettime` (its own test
//! binary: the choice is made once per process, at the first context).

#![allow(clippy::unwrap_used)]

use offtrace_core::clock::monotonic_ns;
use offtrace_core::*;

#[test]
fn offtrace_clock_monotonic_keeps_clock_gettime() {
    // SAFETY: the only test of this binary; no other thread reads the environment yet.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("OFFTRACE_CLOCK", "monotonic")
    };
    let ctx = create_context().unwrap();
    assert!(!timestamps_from_tsc());
    let m0 = monotonic_ns();
    let t = timestamp_ns();
    let m1 = monotonic_ns();
    assert!(m0 <= t && t <= m1);
    destroy_context(ctx).unwrap();
}
