//! Thread-local XPTI state (`docs/reference/xpti-abi.md` §8): the universal ID, the stashed tuple and the scope
//! tracepoint. They live in one `const`-initialised thread-local of `Cell`s without a destructor,
//! so an access is one TLS address computation (one `__tls_get_addr` call in a shared object) and
//! plain loads/stores, with no lazy-init check; the scope setters write the scope and the
//! universal ID through one access. `try_with` keeps calls on exiting threads safe.

use std::cell::Cell;
use std::ffi::c_char;
use std::ptr;

struct State {
    universal_id: Cell<u64>,
    scope: Cell<*mut u8>,
    stash: Cell<Option<(*const c_char, u64)>>,
}

thread_local! {
    static STATE: State = const {
        State { universal_id: Cell::new(0), scope: Cell::new(ptr::null_mut()), stash: Cell::new(None) }
    };
}

/// The thread's universal ID (0 by default).
#[inline]
pub fn universal_id() -> u64 {
    STATE.try_with(|s| s.universal_id.get()).unwrap_or(0)
}

/// Sets the thread's universal ID.
#[inline]
pub fn set_universal_id(uid: u64) {
    let _ = STATE.try_with(|s| s.universal_id.set(uid));
}

/// The stashed (key, value) tuple, if any.
#[inline]
pub fn stashed() -> Option<(*const c_char, u64)> {
    STATE.try_with(|s| s.stash.get()).ok().flatten()
}

/// Stashes a tuple (depth 1: replaces any previous one). The key pointer is stored, not copied.
#[inline]
pub fn stash(key: *const c_char, value: u64) {
    let _ = STATE.try_with(|s| s.stash.set(Some((key, value))));
}

/// Removes the stashed tuple.
#[inline]
pub fn unstash() {
    let _ = STATE.try_with(|s| s.stash.set(None));
}

/// The current scope tracepoint interface pointer (null when none).
#[inline]
pub fn scope() -> *mut u8 {
    STATE.try_with(|s| s.scope.get()).unwrap_or(ptr::null_mut())
}

/// Sets the scope tracepoint and the universal ID in one thread-local access.
#[inline]
pub fn set_scope(tp: *mut u8, uid: u64) {
    let _ = STATE.try_with(|s| {
        s.scope.set(tp);
        s.universal_id.set(uid);
    });
}
