//! One traced OpenCL call: the `OPENCL_API` enter/exit pair around the next layer's function,
//! and the few OpenCL constants the layer itself needs.
//!
//! Cost when no context wants `OPENCL_API`: one relaxed load (`kind_enabled`) and, for the
//! correlation of device activity, nothing else; the wrapper then calls the next layer's entry
//! point directly. When enabled: one `emit_enter` / `emit_exit` pair with the raw argument values
//! (one `u64` per parameter, as the generated table describes them).

use std::mem::MaybeUninit;

use offtrace_core::{ApiCallPayload, CallToken, Kind, Payload, current_correlation_id, emit_enter, emit_exit};

/// The kind of the layer's API records.
pub const OPENCL_API: Kind = Kind::OpenclApi;

pub const CL_SUCCESS: i32 = 0;
pub const CL_OUT_OF_HOST_MEMORY: i32 = -6;
pub const CL_PROFILING_INFO_NOT_AVAILABLE: i32 = -7;
pub const CL_INVALID_VALUE: i32 = -30;
pub const CL_INVALID_OPERATION: i32 = -59;

pub const CL_QUEUE_PROFILING_ENABLE: u64 = 1 << 1;
pub const CL_QUEUE_PROPERTIES: u64 = 0x1093;
pub const CL_QUEUE_PROPERTIES_ARRAY: u32 = 0x1098;
pub const CL_EVENT_COMMAND_QUEUE: u32 = 0x11D0;
pub const CL_EVENT_COMMAND_EXECUTION_STATUS: u32 = 0x11D3;
pub const CL_PROFILING_COMMAND_QUEUED: u32 = 0x1280;
pub const CL_PROFILING_COMMAND_START: u32 = 0x1282;
pub const CL_PROFILING_COMMAND_END: u32 = 0x1283;
pub const CL_COMPLETE: i32 = 0;
pub const CL_RUNNING: i32 = 1;
pub const CL_DEVICE_EXTENSIONS: u32 = 0x1030;
pub const CL_DEVICE_NAME: u32 = 0x102B;
pub const CL_DEVICE_TYPE: u32 = 0x1000;
pub const CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE: u64 = 1 << 0;
pub const CL_DEVICE_EXTENSIONS_WITH_VERSION: u32 = 0x1060;
pub const CL_KERNEL_FUNCTION_NAME: u32 = 0x1190;
pub const CL_MEM_SIZE: u32 = 0x1102;
pub const CL_KERNEL_REFERENCE_COUNT: u32 = 0x1192;

thread_local! {
    /// The enclosing call's correlation id of this thread's last traced OpenCL call.
    static LAST_OUTER: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// The innermost recorded OpenCL call in progress on this thread: its correlation id and its
    /// enclosing call's (`ApiCall::outer`); (0, 0) outside any.
    static OPEN_CALL: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// Whether the OpenCL call the calling thread is in runs nested inside another backend's API
/// call (a UR call on the SYCL path). Read from the layer's hooks, between the call's enter and
/// exit: when `OPENCL_API` is traced the call's enter recorded its enclosing call in
/// `LAST_OUTER`; otherwise the thread's current call is the enclosing one. Objects the layer sees
/// nested (queues, memory, programs, kernels, devices) are reported by the enclosing level, so the
/// layer emits no records of its own for them (`docs/record-model.md`, one record per runtime
/// level).
pub(crate) fn nested_now() -> bool {
    if offtrace_core::kind_enabled(OPENCL_API) {
        LAST_OUTER.try_with(std::cell::Cell::get).unwrap_or(0) != 0
    } else {
        current_correlation_id() != 0
    }
}

/// Whether the trace keeps the OpenCL calls made inside another backend's API call (the UR
/// calls' implementation on the SYCL path): `OFFTRACE_OPENCL_NESTED=1`, or
/// `OFFTRACE_DETAIL=verbose` (`offtrace record --detail verbose`) unless
/// `OFFTRACE_OPENCL_NESTED=0`. Read once.
pub(crate) fn nested_wanted() -> bool {
    static WANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WANTED.get_or_init(|| {
        nested_wanted_from(
            std::env::var("OFFTRACE_OPENCL_NESTED").ok().as_deref(),
            std::env::var("OFFTRACE_DETAIL").ok().as_deref(),
        )
    })
}

/// [`nested_wanted`] from the two variables' values.
fn nested_wanted_from(nested: Option<&str>, detail: Option<&str>) -> bool {
    match nested.map(str::trim) {
        Some("1" | "on" | "true") => true,
        Some("0" | "off" | "false") => false,
        _ => detail.is_some_and(|d| d.trim() == "verbose"),
    }
}

/// An `OPENCL_API` call in progress on this thread. Lives in the wrapper's frame and is filled
/// in place (`enter`, `exit` take `&mut self`): the 152-byte payload is never moved.
pub(crate) struct ApiCall {
    token: CallToken,
    traced: bool,
    /// The correlation id of the call this one is nested in (a UR call on the SYCL path), read
    /// before this call's enter; 0 outside any call.
    outer: u64,
    /// `OPEN_CALL` before this call's enter, put back at its exit.
    prev_open: (u64, u64),
    payload: MaybeUninit<ApiCallPayload>,
}

impl ApiCall {
    #[inline(always)]
    pub(crate) fn new() -> Self {
        Self { token: CallToken::NONE, traced: false, outer: 0, prev_open: (0, 0), payload: MaybeUninit::uninit() }
    }

    /// Reports the enter of function `op` with its raw arguments (when a context wants it).
    #[inline(always)]
    pub(crate) fn enter(&mut self, op: u32, args: &[u64]) {
        if offtrace_core::kind_enabled(OPENCL_API) {
            self.enter_slow(op, args);
        }
    }

    /// [`ApiCall::enter`] for an enqueue, whose device activity needs the enclosing call's
    /// correlation even when `OPENCL_API` itself is not wanted.
    #[inline(always)]
    pub(crate) fn enter_enqueue(&mut self, op: u32, args: &[u64]) {
        if offtrace_core::kind_enabled(OPENCL_API) || crate::enqueue::activity_wanted() {
            self.enter_slow(op, args);
        }
    }

    #[cold]
    #[inline(never)]
    fn enter_slow(&mut self, op: u32, args: &[u64]) {
        let current = current_correlation_id();
        // The program's callback, run by the runtime inside one of the program's own recorded
        // OpenCL calls (both runtimes here run the callback of an already complete event inside
        // `clSetEventCallback`, and may run others inside a wait): its calls are the program's,
        // nested in what that call is nested in, not that call's implementation.
        let (open, open_outer) = OPEN_CALL.try_with(std::cell::Cell::get).unwrap_or((0, 0));
        self.outer = if current != 0 && current == open { open_outer } else { current };
        // An OpenCL call outside the enclosing call of this thread's previous one: that call is
        // over, its commands' device interval can be delivered (`enqueue::close_outer`).
        let outer = self.outer;
        let last = LAST_OUTER.try_with(|l| l.replace(outer)).unwrap_or(0);
        if last != 0 && last != outer {
            crate::enqueue::close_outer(last);
        }
        if !offtrace_core::kind_enabled(OPENCL_API) {
            return;
        }
        // A call inside another backend's API call (a UR call on the SYCL path) is that call's
        // implementation, which the enclosing call's record already stands for: when the recorder
        // alone wants `OPENCL_API` (the direct path), it is not recorded unless asked for
        // (`nested_wanted`). A tool's callbacks still see every call: with a tool subscribed the
        // direct path does not apply. Device work keeps its correlation (`outer`, read above).
        if outer != 0 && offtrace_core::direct_path_applies(OPENCL_API) && !nested_wanted() {
            return;
        }
        let p = self.payload.write(ApiCallPayload::new(op, args));
        self.token = emit_enter(OPENCL_API, op, api_payload(p));
        self.traced = true;
        let own = (self.token.correlation_id(), outer);
        self.prev_open = OPEN_CALL.try_with(|c| c.replace(own)).unwrap_or((0, 0));
    }

    /// The correlation id device work of this call carries: the enclosing call's (the UR call
    /// that issued this OpenCL call), else this call's own (0: none, the caller takes a fresh one).
    pub(crate) fn outer_correlation(&self) -> u64 {
        if self.outer != 0 { self.outer } else { self.token.correlation_id() }
    }

    /// Whether this call runs inside another traced API call (a UR call on the SYCL path).
    pub(crate) fn nested(&self) -> bool {
        self.outer != 0
    }

    /// Reports the exit with the call's OpenCL status (`cl_int` result or `*errcode_ret`).
    #[inline(always)]
    pub(crate) fn exit(&mut self, result: i32, _returned: u64) {
        if self.traced {
            self.exit_slow(result);
        }
    }

    #[cold]
    #[inline(never)]
    fn exit_slow(&mut self, result: i32) {
        self.traced = false;
        let _ = OPEN_CALL.try_with(|c| c.set(self.prev_open));
        // SAFETY: `traced` is set only after the payload was written in `enter_slow`.
        #[allow(unsafe_code)]
        let p = unsafe { self.payload.assume_init_mut() };
        p.result = result;
        p.has_result = 1;
        let token = std::mem::replace(&mut self.token, CallToken::NONE);
        emit_exit(token, api_payload(p));
    }
}

/// The services' payload for an `OPENCL_API` record.
#[inline(always)]
fn api_payload(p: &ApiCallPayload) -> Payload<'_> {
    Payload::api(OPENCL_API, p)
}

/// Where the next layer writes its error code: the caller's `errcode_ret`, or `local` when the
/// caller passed none (so the exit record always has the call's status).
#[inline(always)]
pub(crate) fn errcode_slot(errcode_ret: *mut std::ffi::c_void, local: &mut i32) -> *mut i32 {
    if errcode_ret.is_null() { local } else { errcode_ret.cast() }
}

/// Writes `code` through `errcode_ret` when it is not null.
pub(crate) fn set_errcode(errcode_ret: *mut std::ffi::c_void, code: i32) {
    if !errcode_ret.is_null() {
        // SAFETY: a non-null `errcode_ret` is the caller's `cl_int*` (OpenCL's contract).
        #[allow(unsafe_code)]
        unsafe {
            errcode_ret.cast::<i32>().write(code)
        };
    }
}

/// The number of bytes of a `const size_t region[3]` (width in bytes × height × depth); 0 for null.
///
/// # Safety
///
/// `region` is null or points at three readable `size_t`.
#[allow(unsafe_code)]
pub(crate) unsafe fn region(region: *mut std::ffi::c_void) -> u64 {
    if region.is_null() {
        return 0;
    }
    // SAFETY: the caller guarantees three readable size_t.
    let r = unsafe { std::slice::from_raw_parts(region.cast::<usize>(), 3) };
    (r[0] as u64).saturating_mul(r[1] as u64).saturating_mul(r[2] as u64)
}

/// The value a wrapper returns when the layer panicked (it never should): an OpenCL error.
pub(crate) trait PanicResult {
    fn on_panic() -> Self;
}

impl PanicResult for i32 {
    fn on_panic() -> Self {
        CL_OUT_OF_HOST_MEMORY
    }
}

impl PanicResult for *mut std::ffi::c_void {
    fn on_panic() -> Self {
        std::ptr::null_mut()
    }
}

impl PanicResult for () {
    fn on_panic() -> Self {}
}

/// Runs a wrapper's body; a panic becomes [`PanicResult::on_panic`] (and `CL_OUT_OF_HOST_MEMORY`
/// in `errcode_ret`) instead of unwinding into C, which would abort the program.
#[inline(always)]
pub(crate) fn no_unwind<R: PanicResult>(errcode_ret: *mut std::ffi::c_void, body: impl FnOnce() -> R) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(_) => {
            set_errcode(errcode_ret, CL_OUT_OF_HOST_MEMORY);
            R::on_panic()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::nested_wanted_from;

    #[test]
    fn nested_calls_are_kept_on_request_or_at_verbose_detail() {
        assert!(!nested_wanted_from(None, None));
        assert!(!nested_wanted_from(None, Some("normal")));
        assert!(nested_wanted_from(Some("1"), None));
        assert!(nested_wanted_from(None, Some("verbose")));
        assert!(!nested_wanted_from(Some("0"), Some("verbose")));
        assert!(nested_wanted_from(Some(" on "), Some("basic")));
        assert!(!nested_wanted_from(Some(""), None));
    }
}
