//! The writer's wake-up word: what the writer thread sleeps on between cycles, and what producers,
//! `flush`, `finish` and the fatal-signal handler (`crash.rs`) wake it with.
//!
//! The same three-state futex protocol as `std::thread::park`/`unpark` on Linux, with one
//! difference that is the reason for this file: [`Wakeup::wake`] is an atomic swap and at most
//! one `futex` system call, both async-signal-safe, on a word whose address the signal handler
//! knows. `Thread::unpark` does the same today, but std does not promise it to a signal handler.
//! Cost to a producer: what `unpark` cost (one swap, and a system call only while the writer
//! sleeps), once per quarter ring, never per record.

#![allow(unsafe_code)] // the futex system call

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

const EMPTY: i32 = 0;
const NOTIFIED: i32 = 1;
const SLEEPING: i32 = -1;

#[derive(Debug, Default)]
pub(crate) struct Wakeup {
    state: AtomicI32,
}

impl Wakeup {
    /// Sleeps until [`Wakeup::wake`] or `timeout` (writer thread only). A wake-up that came
    /// while the writer was busy makes this return at once: none is lost.
    pub(crate) fn sleep(&self, timeout: Duration) {
        // Acquire: what the waker did before its Release swap is visible after the wake-up.
        if self.state.fetch_sub(1, Ordering::Acquire) == NOTIFIED {
            return; // NOTIFIED -> EMPTY
        }
        // EMPTY -> SLEEPING: sleep while the word says so (a wake in between changes it and the
        // futex returns at once).
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY:
        // - `state` is a live, aligned 32-bit word for the duration of the call;
        // - `ts` is a valid relative timeout on this stack frame; the other arguments are unused.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.state.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                SLEEPING,
                &ts as *const libc::timespec,
            );
        }
        // Acquire: as above, for a wake-up that ended the sleep.
        self.state.swap(EMPTY, Ordering::Acquire);
    }

    /// Wakes the writer, or makes its next [`Wakeup::sleep`] return at once. Async-signal-safe.
    #[inline]
    pub(crate) fn wake(&self) {
        // Release: publishes what the waker did (a push, a flush request, a crash note).
        if self.state.swap(NOTIFIED, Ordering::Release) == SLEEPING {
            // SAFETY: `state` is a live, aligned 32-bit word; FUTEX_WAKE reads nothing else.
            unsafe {
                libc::syscall(libc::SYS_futex, self.state.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_wake_before_the_sleep_is_not_lost() {
        let w = Wakeup::default();
        w.wake();
        let t = Instant::now();
        w.sleep(Duration::from_secs(10));
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_wake_ends_a_sleep_and_a_sleep_without_one_times_out() {
        let w = Arc::new(Wakeup::default());
        let t = Instant::now();
        w.sleep(Duration::from_millis(20));
        assert!(t.elapsed() >= Duration::from_millis(20));
        let w2 = w.clone();
        let h = std::thread::spawn(move || {
            let t = Instant::now();
            w2.sleep(Duration::from_secs(30));
            t.elapsed()
        });
        // Until the sleeper is asleep (the word says so), then one wake.
        while w.state.load(Ordering::Relaxed) != SLEEPING {
            std::thread::yield_now();
        }
        w.wake();
        assert!(h.join().expect("the sleeper panicked") < Duration::from_secs(20));
    }
}
