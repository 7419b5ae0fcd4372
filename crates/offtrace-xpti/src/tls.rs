//! Thread-local XPTI state (`xpti-abi.md` §8): the universal ID, the stashed tuple and the scope
//! tracepoint. All are `const`-initialised `Cell`s without destructors, so an access is a plain
//! TLS load/store with no lazy-init check; `try_with` keeps calls on exiting threads safe.

use std::cell::Cell;
use std::ffi::c_char;
use std::ptr;

thread_local! {
    static UNIVERSAL_ID: Cell<u64> = const { Cell::new(0) };
    static STASH: Cell<Option<(*const c_char, u64)>> = const { Cell::new(None) };
    static SCOPE: Cell<*mut u8> = const { Cell::new(ptr::null_mut()) };
}

/// The thread's universal ID (0 by default).
#[inline]
pub fn universal_id() -> u64 {
    UNIVERSAL_ID.try_with(Cell::get).unwrap_or(0)
}

/// Sets the thread's universal ID.
#[inline]
pub fn set_universal_id(uid: u64) {
    let _ = UNIVERSAL_ID.try_with(|c| c.set(uid));
}

/// The stashed (key, value) tuple, if any.
#[inline]
pub fn stashed() -> Option<(*const c_char, u64)> {
    STASH.try_with(Cell::get).ok().flatten()
}

/// Stashes a tuple (depth 1: replaces any previous one). The key pointer is stored, not copied.
#[inline]
pub fn stash(key: *const c_char, value: u64) {
    let _ = STASH.try_with(|c| c.set(Some((key, value))));
}

/// Removes the stashed tuple.
#[inline]
pub fn unstash() {
    let _ = STASH.try_with(|c| c.set(None));
}

/// The current scope tracepoint interface pointer (null when none).
#[inline]
pub fn scope() -> *mut u8 {
    SCOPE.try_with(Cell::get).unwrap_or(ptr::null_mut())
}

/// Sets the scope tracepoint.
#[inline]
pub fn set_scope(tp: *mut u8) {
    let _ = SCOPE.try_with(|c| c.set(tp));
}
