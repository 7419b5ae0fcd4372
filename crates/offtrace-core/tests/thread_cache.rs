//! The thread-pointer cache of the thread state (`src/thread_cache.rs`) as applications load
//! offtrace: offtrace-core in a shared object (`examples/thread_cache_so.rs`, which `cargo test`
//! builds beside this test), loaded with `dlopen`, so the state lives in dynamic TLS and a
//! stale slot would hand a thread another thread's (or freed) storage. Each check is a thread's
//! first offtrace call, comparing the kernel id in the state it gets with its own.

#![allow(unsafe_code)]

use std::ffi::CString;

/// `libthread_cache_so.so` of this test's profile: `target/<profile>/examples/`, beside `deps/`.
fn library() -> *mut libc::c_void {
    let exe = std::env::current_exe().expect("test path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target/<profile>");
    let path = dir.join("examples").join("libthread_cache_so.so");
    assert!(path.exists(), "{} missing: `cargo test -p offtrace-core` builds it (examples)", path.display());
    let c = CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a NUL-terminated path; the library's constructors are Rust's (none of ours).
    let lib = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!lib.is_null(), "dlopen {}", path.display());
    lib
}

fn symbol(lib: *mut libc::c_void, name: &str) -> *mut libc::c_void {
    let c = CString::new(name).expect("name");
    // SAFETY: `lib` is a live handle; `c` is NUL-terminated.
    let f = unsafe { libc::dlsym(lib, c.as_ptr()) };
    assert!(!f.is_null(), "{name}");
    f
}

/// Threads started and joined in a loop, so that each round's threads reuse the last round's
/// stacks and TCBs (their thread pointers): a third make their first call in their body, a
/// third in a thread-local destructor, a third in a pthread-key destructor (after the TLS
/// destructors). Every one must get its own state.
#[test]
fn threads_reusing_a_dead_threads_tcb_get_their_own_state() {
    let lib = library();
    // SAFETY: the example's `extern "C" fn(u32, u32) -> u64`.
    let churn: extern "C" fn(u32, u32) -> u64 =
        unsafe { std::mem::transmute(symbol(lib, "offtrace_thread_cache_churn")) };
    assert_eq!(churn(300, 4), 0, "checks that found another thread's state (u64::MAX: a thread did not start)");
}

/// A fork child whose new threads get the stacks (and TCBs) of parent threads that held cache
/// slots at the fork: the child's table must not hand them those threads' states.
#[test]
fn a_fork_childs_threads_get_their_own_state() {
    let lib = library();
    // SAFETY: the example's `extern "C" fn(u32, u32) -> i32`.
    let fork: extern "C" fn(u32, u32) -> i32 =
        unsafe { std::mem::transmute(symbol(lib, "offtrace_thread_cache_fork")) };
    assert_eq!(fork(6, 24), 0, "child threads that got another thread's state (255: a thread failed; -1: fork/wait)");
}
