//! Forwarding termination signals to the traced program.
//!
//! While the program runs, SIGINT, SIGTERM, SIGHUP and SIGQUIT must not kill `offtrace` (it
//! still has to read the trace and return the program's status). A signal someone sent to
//! `offtrace` itself (`kill`, `si_code <= 0`) is passed on to the program. A signal the kernel
//! generated (Ctrl-C at the terminal, `si_code > 0`) already reached the program, which is in
//! the same process group, so it is not sent twice.
//!
//! A signal sent before the program's pid is known (between `fork` and [`set_child`]) is kept
//! and sent as soon as it is: a program that announces it is ready can be signalled at once.
//!
//! The handler does only async-signal-safe work: atomic loads and stores and `kill(2)`.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicI32, Ordering};

/// The traced program's pid (0 = none yet).
static CHILD: AtomicI32 = AtomicI32::new(0);
/// A signal to forward that arrived while `CHILD` was 0 (0 = none). SeqCst on both words, so that
/// of a handler storing here and then reading `CHILD`, and [`set_child`] storing `CHILD` and then
/// taking this, at least one sees the other's store: the signal is sent once, never lost.
static PENDING: AtomicI32 = AtomicI32::new(0);

const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY:
    // - `info` is the siginfo_t the kernel passed to an SA_SIGINFO handler: valid for reads for
    //   the duration of the handler, or null (checked).
    let sent_by_user = info.is_null() || unsafe { (*info).si_code } <= 0;
    if !sent_by_user {
        return;
    }
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        send(pid, sig);
        return;
    }
    PENDING.store(sig, Ordering::SeqCst);
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        let sig = PENDING.swap(0, Ordering::SeqCst);
        if sig != 0 {
            send(pid, sig);
        }
    }
}

fn send(pid: libc::pid_t, sig: libc::c_int) {
    // SAFETY:
    // - kill(2) is async-signal-safe and takes plain integers; a stale pid at worst makes it
    //   fail with ESRCH.
    unsafe {
        libc::kill(pid, sig);
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

/// Tells the handler which process to forward to, and sends it a signal that came before.
pub fn set_child(pid: u32) {
    let pid = i32::try_from(pid).unwrap_or(0);
    CHILD.store(pid, Ordering::SeqCst);
    let sig = PENDING.swap(0, Ordering::SeqCst);
    if sig != 0 && pid > 0 {
        send(pid, sig);
    }
}
