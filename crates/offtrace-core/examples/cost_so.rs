//! The services' cost loops (`tests/cost_ops`) in a shared object, as applications load
//! offtrace: `tests/cost.rs` loads it with `dlopen` when `COST_SO` names it
//! (`docs/overhead.md`, `## Tool API`).

#![allow(unsafe_code, missing_docs)]
#![allow(clippy::unwrap_used)]

#[path = "../tests/cost_ops/mod.rs"]
mod cost_ops;

/// Runs `op` (a NUL-terminated name, as `COST_OP`) `n` times into `*out`; 0 on success, -1 for
/// a null pointer or a panic.
///
/// # Safety
///
/// `op` is null or NUL-terminated; `out` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_cost_run(op: *const std::ffi::c_char, n: u64, out: *mut cost_ops::Measured) -> i32 {
    if op.is_null() || out.is_null() {
        return -1;
    }
    // SAFETY: `op` is non-null and NUL-terminated (the caller's contract).
    let op = unsafe { std::ffi::CStr::from_ptr(op) }.to_string_lossy().into_owned();
    match std::panic::catch_unwind(|| cost_ops::measure(&op, n)) {
        Ok(m) => {
            // SAFETY: `out` is non-null and writable (the caller's contract).
            unsafe { out.write(m) };
            0
        }
        Err(_) => -1,
    }
}
