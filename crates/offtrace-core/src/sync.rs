//! The synchronisation facade: `std` normally, `loom` under `--cfg loom`, so the lock-free
//! structures of this crate are model-checked with the code that ships.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// One round of a wait loop on another thread's progress: a spin hint for the first 64 rounds
/// (`spins` counts them), then a yield. Under loom always a yield, so the model checker
/// schedules the thread being waited for.
#[inline]
pub(crate) fn spin_wait(spins: &mut u32) {
    #[cfg(loom)]
    {
        let _ = spins;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        *spins += 1;
        if *spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// A flag that gates deliveries (a context's `active` / `exits`), read `Relaxed` by
/// [`crate::inflight::ThreadSlot::enter_if_active`]. The contexts keep `std` flags in statics
/// (loom's atomics cannot be built in a `static`), so under loom the handshake's model passes a
/// loom flag and the shipped callers keep theirs: both implement this.
pub(crate) trait GateFlag {
    fn load_relaxed(&self) -> bool;
}

impl GateFlag for std::sync::atomic::AtomicBool {
    #[inline(always)]
    fn load_relaxed(&self) -> bool {
        self.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(loom)]
impl GateFlag for loom::sync::atomic::AtomicBool {
    fn load_relaxed(&self) -> bool {
        self.load(Ordering::Relaxed)
    }
}

/// `loom::cell::UnsafeCell`'s closure API over `std::cell::UnsafeCell`.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

#[cfg(not(loom))]
#[derive(Debug)]
#[repr(transparent)] // `Reservation::contiguous` views a run of slots as `[MaybeUninit<T>]`
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(v: T) -> Self {
        Self(std::cell::UnsafeCell::new(v))
    }
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
