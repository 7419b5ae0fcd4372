//! The setup shared by `benches/notify.rs` and `tests/cost.rs` (instruction counts): Intel's
//! dispatcher (`<venv>/lib/libxptifw.so.1`, venv from `OFFTRACE_SYCL_VENV`, default
//! `<workspace>/.venv`) with tracing forced on, the agent initialised through its real
//! `xptiTraceInit` for `ur.call` and `sycl`, the trace to /dev/null, an empty callback on two
//! baseline streams, and one `urEnqueueUSMMemcpy` call's params struct.
#![allow(dead_code, unsafe_code, missing_docs, unreachable_pub)]

use std::ffi::{CString, c_char, c_void};
use std::path::{Path, PathBuf};

use offtrace_xpti::abi::{
    FunctionWithArgs, Payload, TraceEventData, TracepointCallback, payload_flags, trace_type as tt,
};

pub type NotifyFn = unsafe extern "C" fn(u8, u16, *mut TraceEventData, *mut TraceEventData, u64, *const c_void) -> i32;
pub type MakeEventFn = unsafe extern "C" fn(*const c_char, *mut Payload, u16, i32, *mut u64) -> *mut TraceEventData;
pub type RegisterStreamFn = unsafe extern "C" fn(*const c_char) -> u8;
pub type RegisterCallbackFn = unsafe extern "C" fn(u8, u16, TracepointCallback) -> i32;
pub type AddMetadataFn = unsafe extern "C" fn(*mut TraceEventData, *const c_char, i32) -> i32;
pub type RegisterObjectFn = unsafe extern "C" fn(*const c_char, usize, u8) -> i32;
pub type StashFn = unsafe extern "C" fn(*const c_char, u64) -> i32;
pub type ForceFn = unsafe extern "C" fn(bool);

/// The dispatcher's entry points and the streams and events the loops use (events as
/// addresses: the 2-thread loops share this struct).
pub struct Xpti {
    pub notify: NotifyFn,
    pub ur_stream: u8,
    pub sycl_stream: u8,
    pub empty_ur: u8,
    pub empty_sycl: u8,
    pub ur_event: usize,
    pub task_event: usize,
    pub stash: StashFn,
}

pub unsafe extern "C" fn empty_cb(_: u16, _: *mut TraceEventData, _: *mut TraceEventData, _: u64, _: *const c_void) {}

pub fn venv() -> PathBuf {
    std::env::var_os("OFFTRACE_SYCL_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv"))
}

pub unsafe fn sym<T: Copy>(h: *mut c_void, name: &str) -> T {
    let c = CString::new(name).expect("name");
    // SAFETY: `h` is a live dlopen handle and `c` a NUL-terminated name.
    let p = unsafe { libc::dlsym(h, c.as_ptr()) };
    assert!(!p.is_null(), "{name} missing from the dispatcher");
    // SAFETY: the caller names the symbol's real function-pointer type `T` (pointer-sized).
    unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) }
}

pub fn setup() -> Option<Xpti> {
    setup_with_ring("4096")
}

/// [`setup`] with `ring_records` as `OFFTRACE_BUFFER_RECORDS` (records of 16 words per thread
/// ring).
pub fn setup_with_ring(ring_records: &str) -> Option<Xpti> {
    let lib = venv().join("lib/libxptifw.so.1");
    if !lib.exists() {
        eprintln!("notify bench skipped: no {} (set OFFTRACE_SYCL_VENV)", lib.display());
        return None;
    }
    // SAFETY: single-threaded at this point (criterion has not started anything).
    unsafe {
        std::env::set_var("XPTI_FRAMEWORK_DISPATCHER", &lib);
        std::env::set_var("OFFTRACE_OUTPUT", "/dev/null");
        std::env::set_var("OFFTRACE_BUFFER_RECORDS", ring_records);
        std::env::remove_var("XPTI_SUBSCRIBERS");
        std::env::remove_var("OFFTRACE_TOOLS");
    }
    let c = CString::new(lib.to_string_lossy().as_bytes()).expect("path");
    // SAFETY: `c` is a NUL-terminated path; loading Intel's dispatcher runs only its constructors.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!h.is_null(), "dlopen {}", lib.display());
    // SAFETY: every symbol is resolved with its XPTI 2026.2 prototype (docs/reference/xpti-abi.md §2) and called
    // with valid arguments; the events and objects made here live for the whole bench.
    unsafe {
        let force: ForceFn = sym(h, "xptiForceSetTraceEnabled");
        let reg_stream: RegisterStreamFn = sym(h, "xptiRegisterStream");
        let reg_cb: RegisterCallbackFn = sym(h, "xptiRegisterCallback");
        let make_event: MakeEventFn = sym(h, "xptiMakeEvent");
        let add_md: AddMetadataFn = sym(h, "xptiAddMetadata");
        let reg_obj: RegisterObjectFn = sym(h, "xptiRegisterObject");
        force(true);
        // The agent's real init path: it finds the dispatcher (RTLD_NOLOAD), registers streams
        // and trampolines.
        offtrace_agent::xptiTraceInit(1, 0, c"1.0.0".as_ptr(), c"xpti.framework".as_ptr());
        offtrace_agent::xptiTraceInit(0, 12, c"0.12".as_ptr(), c"ur.call".as_ptr());
        offtrace_agent::xptiTraceInit(9, 0, c"sycl 9.0".as_ptr(), c"sycl".as_ptr());
        assert!(offtrace_agent::recorder::is_recording(), "agent did not start");
        let ur_stream = reg_stream(c"ur.call".as_ptr());
        let sycl_stream = reg_stream(c"sycl".as_ptr());
        let empty_ur = reg_stream(c"bench.empty.ur".as_ptr());
        let empty_sycl = reg_stream(c"bench.empty.sycl".as_ptr());
        for t in [tt::FUNCTION_WITH_ARGS_BEGIN, tt::FUNCTION_WITH_ARGS_END] {
            reg_cb(empty_ur, t, empty_cb);
        }
        for t in [tt::NODE_CREATE, tt::TASK_BEGIN, tt::SIGNAL, tt::TASK_END] {
            reg_cb(empty_sycl, t, empty_cb);
        }
        let mk = |name: &'static std::ffi::CStr| {
            let mut p = Payload {
                name: name.as_ptr(),
                stack_trace: std::ptr::null(),
                source_file: c"<unknown-file>".as_ptr(),
                line_no: 0,
                column_no: 0,
                code_ptr_va: std::ptr::null(),
                internal: 0,
                flags: payload_flags::NAME_AVAILABLE
                    | payload_flags::SOURCE_FILE_AVAILABLE
                    | payload_flags::LINE_INFO_AVAILABLE
                    | payload_flags::COLUMN_INFO_AVAILABLE,
                uid: Default::default(),
            };
            let mut inst = 0u64;
            let e = make_event(name.as_ptr(), &mut p, 2, 1, &mut inst);
            assert!(!e.is_null());
            e
        };
        let ur_event = mk(c"Unified Runtime call");
        let task_event = mk(c"typeinfo name for dpnp::tensor::kernels::copy_kernel");
        let u = |v: u64| reg_obj((&v as *const u64).cast(), 8, 3);
        for (k, v) in [
            (c"sycl_device", u(0x5646_8276_91e0)),
            (c"sycl_device_name", reg_obj(c"AMD EPYC".as_ptr(), 8, 1)),
            (c"sycl_device_type", reg_obj(c"CPU".as_ptr(), 3, 1)),
            (c"queue_id", u(2)),
            (c"kernel_name", reg_obj(c"copy_kernel".as_ptr(), 11, 1)),
            (c"from_source", reg_obj(c"\x01".as_ptr(), 1, 5)),
        ] {
            add_md(task_event, k.as_ptr(), v);
        }
        Some(Xpti {
            notify: sym(h, "xptiNotifySubscribers"),
            ur_stream,
            sycl_stream,
            empty_ur,
            empty_sycl,
            ur_event: ur_event as usize,
            task_event: task_event as usize,
            stash: sym(h, "xptiStashTuple"),
        })
    }
}

/// Argument variables and the params struct of one `urEnqueueUSMMemcpy` call.
pub struct MemcpyCall {
    vars: [u64; 8],
    function_id: u32,
    out_event: u64,
    params: [*const c_void; 8],
    result: i32,
}

impl MemcpyCall {
    pub fn new() -> Box<Self> {
        let function_id = offtrace_xpti::ur::function_by_name("urEnqueueUSMMemcpy").map_or(33, |f| f.id);
        let mut c = Box::new(Self {
            vars: [0x5646_8300_0000, 1, 0x7f00_1000, 0x7f00_2000, 4096, 0, 0, 0],
            function_id,
            out_event: 0,
            params: [std::ptr::null(); 8],
            result: 0,
        });
        c.vars[7] = &c.out_event as *const u64 as u64;
        for i in 0..8 {
            c.params[i] = (&c.vars[i] as *const u64).cast();
        }
        c
    }

    /// One begin + end pair on `stream`.
    #[inline]
    pub fn pair(&mut self, x: &Xpti, stream: u8, instance: u64) {
        let begin = FunctionWithArgs {
            function_id: self.function_id,
            function_name: c"urEnqueueUSMMemcpy".as_ptr(),
            args_data: self.params.as_mut_ptr().cast(),
            ret_data: std::ptr::null_mut(),
            user_data: std::ptr::null_mut(),
        };
        let ev = x.ur_event as *mut TraceEventData;
        // SAFETY: a live event of the dispatcher, and a user data that lives across the call.
        unsafe {
            (x.notify)(
                stream,
                tt::FUNCTION_WITH_ARGS_BEGIN,
                std::ptr::null_mut(),
                ev,
                instance,
                (&begin as *const FunctionWithArgs).cast(),
            );
        }
        self.out_event = 0x5646_8400_0000 + instance;
        let end = FunctionWithArgs { ret_data: (&mut self.result as *mut i32).cast(), ..begin };
        // SAFETY: as for the begin; `ret_data` points to `self.result`.
        unsafe {
            (x.notify)(
                stream,
                tt::FUNCTION_WITH_ARGS_END,
                std::ptr::null_mut(),
                ev,
                instance,
                (&end as *const FunctionWithArgs).cast(),
            );
        }
    }
}
