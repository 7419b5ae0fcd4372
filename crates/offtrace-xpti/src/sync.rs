//! The synchronisation facade (as in `offtrace-core`): `std` normally, `loom` under
//! `--cfg loom`, so the lock-free tables of this crate (the key map, the callback lists) are
//! model-checked with the code that ships. Process-wide statics stay on `std` (loom's types
//! cannot be built in a `static`).

#[cfg(loom)]
pub(crate) use loom::sync::Mutex;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Under loom, a point of the total order of sequentially consistent accesses: loom models
/// `SeqCst` loads, stores and read-modify-writes as acquire/release only (it says so: "may fail
/// to model correct code"), but models `fence(SeqCst)` exactly. Code whose correctness rests on
/// the total order of `SeqCst` accesses (the key map's validation: the store-buffering pattern)
/// calls this between the two accesses of each side; without loom it is nothing, and the
/// `SeqCst` accesses themselves give the order (on x86-64 the read-modify-write is a locked
/// instruction, a full barrier).
#[inline(always)]
pub(crate) fn seq_cst_point() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}
