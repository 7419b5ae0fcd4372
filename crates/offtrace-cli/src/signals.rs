//! Forwarding termination signals to the traced program.
//!
//! While the program runs, SIGINT, SIGTERM, SIGHUP and SIGQUIT must not kill `offtrace` (it
//! still has to read the trace and return the program's status). A signal someone sent to
//! `offtrace` itself (`kill`, `si_code <= 0`) is passed on to the program. A signal the kernel
//! generated (Ctrl-C at the terminal, `si_code > 0`) already reached the program, which is in
//! the same process group, so it is not sent twice.
//!
//! The handler does only async-signal-safe work: one atomic load and `kill(2)`.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicI32, Ordering};

/// The traced program's pid (0 = none yet). Relaxed is enough: the handler only needs some
/// recent value of this one word, and nothing else is published through it.
static CHILD: AtomicI32 = AtomicI32::new(0);

const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY:
    // - `info` is the siginfo_t the kernel passed to an SA_SIGINFO handler: valid for reads for
    //   the duration of the handler, or null (checked).
    let sent_by_user = info.is_null() || unsafe { (*info).si_code } <= 0;
    let pid = CHILD.load(Ordering::Relaxed);
    if sent_by_user && pid > 0 {
        // SAFETY:
        // - kill(2) is async-signal-safe and takes plain integers; a stale pid at worst makes
        //   it fail with ESRCH.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// Installs the forwarding handler for the four signals. Handlers (not `SIG_IGN`) are reset to
/// the default by `exec`, so the program starts with normal signal behaviour.
pub fn install() -> std::io::Result<()> {
    for sig in FORWARDED {
        // SAFETY:
        // - `sigaction` is a plain C struct for which all-zero bytes is a valid value.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = forward;
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY:
        // - `sa.sa_mask` is a valid sigset_t owned by this frame.
        // - `sa` is fully initialised and outlives the call; a null old-action pointer is allowed.
        // - `forward` has the SA_SIGINFO handler signature and is async-signal-safe.
        let rc = unsafe {
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Tells the handler which process to forward to.
pub fn set_child(pid: u32) {
    CHILD.store(i32::try_from(pid).unwrap_or(0), Ordering::Relaxed);
}
