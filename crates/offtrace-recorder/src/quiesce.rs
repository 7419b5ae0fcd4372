//! Quiescence at finish: the writer's last drain happens after every record that passed the gate
//! has been pushed (or counted as dropped), without a fence instruction on the record path.
//!
//! A recording thread stores `busy = true` on its own ring, then looks at the gate (`CURRENT`)
//! a second time, pushes, and stores `busy = false` (Release). `finish` closes the gate; the
//! writer then calls `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which runs a full memory
//! barrier on every CPU running a thread of this process, and only then reads the `busy` marks.
//! Either a thread's `busy = true` was visible to the writer (it waits for the thread's
//! `busy = false`), or the thread's second look came after the barrier and saw the gate closed
//! (it counts its record as dropped). This is the asymmetric Dekker pattern of liburcu and folly:
//! the fast side pays a compiler fence, the rare side a system call.
//!
//! Where `membarrier` is refused (kernels before 4.14, seccomp filters), the record path falls
//! back to a real `SeqCst` fence, decided once when the first recording starts.

#![allow(unsafe_code)] // the membarrier system call

use std::sync::atomic::{AtomicBool, Ordering, compiler_fence, fence};

/// `membarrier` cannot be used: the record path fences itself.
static FENCE_ON_RECORD_PATH: AtomicBool = AtomicBool::new(false);
/// Registration was tried (once per process).
static REGISTERED: std::sync::Once = std::sync::Once::new();

const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

fn membarrier(cmd: libc::c_long) -> bool {
    // SAFETY: membarrier takes two integers (command, flags) and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long) == 0 }
}

/// Registers the process for expedited barriers (before the first recording is installed, so
/// the record path sees the outcome with the recording itself).
pub(crate) fn prepare() {
    REGISTERED.call_once(|| {
        // SAFETY: as in `membarrier`: a query command with no flags.
        let supported = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_QUERY, 0 as libc::c_long) };
        let ok = supported > 0
            && supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED != 0
            && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
        // Relaxed: published with the recording (`install`'s Release, the record path's Acquire).
        FENCE_ON_RECORD_PATH.store(!ok, Ordering::Relaxed);
    });
}

/// The record path's side, between `busy = true` and the second look at the gate.
#[inline(always)]
pub(crate) fn enter_fence() {
    // Relaxed: set before any recording is installed and never changed after.
    if FENCE_ON_RECORD_PATH.load(Ordering::Relaxed) {
        fence(Ordering::SeqCst);
    } else {
        compiler_fence(Ordering::SeqCst);
    }
}

/// The writer's side, after the gate is closed and before it reads the `busy` marks.
pub(crate) fn barrier() {
    if FENCE_ON_RECORD_PATH.load(Ordering::Relaxed) || !membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) {
        fence(Ordering::SeqCst);
    }
}
