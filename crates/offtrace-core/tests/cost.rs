//! Fixed-count loops of the services' record paths, for instruction counts under callgrind
//! (`docs/overhead.md`, `## Tracing services`): run with N and 2N iterations and divide the
//! difference by N. Ignored in normal runs.
//!
//! `COST_OP=callback|instant|buffer_record|buffer_activity|timestamp|loop COST_N=100000 valgrind --tool=callgrind
//! target/release/deps/cost-* --ignored --exact instructions`
//!
//! The runtime's own work, for the accounting beside each record path: `activity_off` and
//! `api_off` make the same emits as `buffer_activity` and `buffer_record` in a context whose
//! buffer wants neither kind (so nothing is delivered); `buffer_activity_built` and
//! `activity_built_off` build the copy's payload per record, as a backend does.
//!
//! With `COST_SO=<path to libcost_so.so>` the same loops run inside that shared object
//! (`examples/cost_so.rs`, `cargo build --release -p offtrace-core --example cost_so`, then
//! `target/release/examples/libcost_so.so`), loaded with `dlopen`: offtrace-core as applications
//! load it, every thread-local access a call to `__tls_get_addr` (`docs/overhead.md`, `## Tool API`).
//!
//! With `COST_CPU=1` (outside valgrind) it prints the CPU time per operation instead: of the
//! emitting thread (`CLOCK_THREAD_CPUTIME_ID`: what the application thread pays; time the thread
//! spends descheduled on a loaded machine does not count) and of the process (every thread,
//! the services' delivery thread included, up to the final flush).

#![allow(unsafe_code)]
#![allow(clippy::unwrap_used)]

mod cost_ops;
use cost_ops::{Measured, measure};

#[test]
#[ignore = "a measurement: run under callgrind"]
fn instructions() {
    let op = std::env::var("COST_OP").unwrap_or_default();
    let n: u64 = std::env::var("COST_N").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let m = match std::env::var_os("COST_SO") {
        Some(path) => measure_in_shared_object(&path, &op, n),
        None => measure(&op, n),
    };
    if std::env::var_os("COST_CPU").is_some() {
        println!(
            "cpu_ns_per_op {op} thread={:.2} process={:.2} asymmetric={}",
            m.thread_ns_per_op, m.process_ns_per_op, m.asymmetric
        );
    }
}

/// [`measure`] as compiled into the shared object at `path` (`offtrace_cost_run`).
fn measure_in_shared_object(path: &std::ffi::OsStr, op: &str, n: u64) -> Measured {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_bytes()).unwrap();
    let op = std::ffi::CString::new(op).unwrap();
    // SAFETY: `path` is NUL-terminated; the library is ours (no constructors beyond Rust's).
    let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!lib.is_null(), "dlopen {path:?}");
    // SAFETY: a live handle and a NUL-terminated name.
    let sym = unsafe { libc::dlsym(lib, c"offtrace_cost_run".as_ptr()) };
    assert!(!sym.is_null(), "offtrace_cost_run in {path:?}");
    type Run = unsafe extern "C" fn(*const std::ffi::c_char, u64, *mut Measured) -> i32;
    // SAFETY: the symbol is `examples/cost_so.rs`'s `offtrace_cost_run`, of this type.
    let run: Run = unsafe { std::mem::transmute::<*mut std::ffi::c_void, Run>(sym) };
    let mut m = Measured::default();
    // SAFETY: `op` is NUL-terminated, `m` writable. The library stays loaded (its delivery
    // thread may outlive the call).
    let rc = unsafe { run(op.as_ptr(), n, &mut m) };
    assert_eq!(rc, 0, "offtrace_cost_run failed");
    m
}
