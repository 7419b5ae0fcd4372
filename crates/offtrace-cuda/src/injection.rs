//! The injection: what `InitializeInjection` sets up, the CUPTI callback (application
//! threads) and the activity buffer callbacks (CUPTI's thread).
//!
//! Start-up, once per process: load CUPTI (`cupti::load`), subscribe (`cuptiSubscribe_v2` with
//! the name "offtrace", else `cuptiSubscribe`), enable the runtime, driver and resource callback
//! domains, register the trace clock as CUPTI's timestamp source, register the buffer
//! callbacks and enable the activity kinds. Whatever fails leaves the program untouched and
//! says why once on stderr (prefixed `offtrace:`), e.g. another CUPTI subscriber
//! (`CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED`, named by `cuptiSubscribe_v2`).
//!
//! Application threads pay, per CUDA API call: one relaxed counter increment, and when a
//! services context wants the API kind, the argument copy and the enter/exit emits. Device
//! records are decoded and emitted on CUPTI's buffer thread.

#![allow(unsafe_code)] // the CUPTI callbacks read CUPTI's structs by offset

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::collections::HashSet;
use std::ffi::{CStr, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::activity::{self, Activity};
use crate::correlation_map::CorrelationMap;
use crate::cupti::{self, Cupti, SubscriberHandle};
use crate::dump::{self, Dump};
use crate::emit;
use crate::generated::cupti_layout as l;
use crate::table::{self, ApiDomain};
use offtrace_core::ApiCallPayload;

/// Activity buffer size handed to CUPTI (Kineto uses 4 MiB; fewer, larger buffers mean fewer
/// completions on CUPTI's thread).
const BUFFER_SIZE: usize = 8 << 20;
/// CUPTI requires 8-byte aligned buffers.
const BUFFER_ALIGN: usize = 8;
/// Callback ids are below this in both API domains (runtime 523, driver 807 in CUDA 13.0).
const MAX_CBID: usize = 1024;

/// Who owns CUPTI in this process, as seen at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// offtrace subscribed: API callbacks and activity records are offtrace's.
    Offtrace,
    /// Another subscriber was there first (its name when CUPTI told it): offtrace stays off.
    Other(String),
}

/// Counters the backend keeps (put into the trace's drop and overhead accounting at the end).
#[derive(Debug, Default)]
pub struct Stats {
    pub api_calls: [AtomicU64; 2],
    pub records: AtomicU64,
    pub buffers: AtomicU64,
    /// `cuptiActivityGetNumDroppedRecords`, summed over completed buffers.
    pub dropped: AtomicU64,
    /// CUPTI's own overhead records (`CUPTI_ACTIVITY_KIND_OVERHEAD`), summed, in ns.
    pub cupti_overhead_ns: AtomicU64,
    /// The same by `CUpti_ActivityOverheadKind >> 16`: 0 the driver (compiler, unknown), 1 buffer
    /// flush, 2 instrumentation, 3 resource, 4 runtime-triggered module loading, 5 lazy function
    /// loading, 6 command buffer full, 7 activity buffer request, 8 UVM activity init.
    pub cupti_overhead_by_kind: [AtomicU64; 12],
    /// Time spent in offtrace's buffer-completion processing, in ns.
    pub processing_ns: AtomicU64,
    pub unpaired_device_records: AtomicU64,
    /// Driver launches made outside any traced runtime call, from CUPTI's API activity records.
    pub driver_only_launches: AtomicU64,
    /// Launches into a stream being captured (no dispatch record: [`launch_captured`]).
    pub captured_launches: AtomicU64,
}

/// The live injection (process-wide).
pub struct Injection {
    pub cupti: Cupti,
    subscriber: usize,
    pub ownership: Ownership,
    /// Added to CUPTI's timestamps to put them on the trace clock: 0 when CUPTI takes its
    /// timestamps from offtrace's clock (the timestamp callback), else monotonic − realtime.
    pub clock_offset_ns: i64,
    pub correlations: CorrelationMap,
    pub stats: Stats,
    per_cbid: [Box<[AtomicU64]>; 2],
    dump: Option<Dump>,
    allocation_rules: [Box<[AllocRule]>; 2],
    launch_rules: [Box<[LaunchRule]>; 2],
    /// By callback id: [`CAPTURE_BEGIN`], [`CAPTURE_END`] or 0 ([`capture_rules`]).
    capture_rules: [Box<[u8]>; 2],
    driver: DriverFns,
    kernel_params: Mutex<HashMap<usize, KernelInfo>>,
    /// Queues (streams) with a definition in the trace: created streams, each context's
    /// default stream, per-thread default streams when a launch first uses them.
    defined_queues: Mutex<HashSet<u64>>,
    graph_nodes: Mutex<GraphNodes>,
    finished: AtomicBool,
    /// Every driver call is traced and recorded (`OFFTRACE_CUDA_DRIVER_API=1`).
    driver_all: bool,
    launch_mode: LaunchMode,
    /// Driver launch functions whose operation definition this backend wrote into the trace
    /// (for the driver-only launches it writes itself, [`Injection::driver_launch`]).
    driver_launch_ops: Mutex<HashSet<u32>>,
    /// The driver launch functions' API activity records are on ([`driver_launch_record_ids`]).
    driver_launch_records: bool,
    /// The recorder's services context when this process writes a trace (`OFFTRACE_OUTPUT`).
    recorder: Mutex<Option<offtrace_core::ContextId>>,
    /// The start's subscription plan and the current one ([`measure_phase`] changes it).
    plan: Mutex<(Plan, Plan)>,
}

impl std::fmt::Debug for Injection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Injection").field("cupti", &self.cupti.path).field("ownership", &self.ownership).finish()
    }
}

static INJECTION: OnceLock<Injection> = OnceLock::new();
static STARTED: AtomicBool = AtomicBool::new(false);

/// The injection, once started.
pub fn get() -> Option<&'static Injection> {
    INJECTION.get()
}

thread_local! {
    /// Open API calls of this thread (CUPTI's enter/exit nest per thread).
    static OPEN: RefCell<Vec<emit::OpenCall>> = const { RefCell::new(Vec::new()) };
    /// Runtime calls open on this thread: driver calls inside them are the runtime's own work,
    /// so allocations and launches are taken from the runtime call only.
    static RUNTIME_DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Set while the backend itself calls CUDA (parameter info): those calls are not traced.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// How an allocation or free function passes its pointer and size (indices into its params).
#[derive(Debug, Clone, Copy, Default)]
struct AllocRule {
    op: u8, // 0 none, 1 alloc, 2 free
    ptr: u8,
    size: u8,
    /// `cuMemAllocPitch`/`cudaMallocPitch`: size = *pitch × height.
    pitch: u8,
    height: u8,
    memory_type: u8,
}

/// Where a launch function passes what the launch-time dispatch needs (indices into its
/// parameters, resolved once at start-up so a launch searches no names).
#[derive(Debug, Clone, Copy)]
struct LaunchRule {
    active: bool,
    func: u8,
    params: u8,
    /// `cuLaunchKernelEx`: the `CUlaunchConfig*` holding the geometry ([`NONE`] otherwise).
    config: u8,
    /// gridDimX..Z, blockDimX..Z ([`NONE`] when passed in `config`).
    geometry: [u8; 6],
    /// `hStream` ([`NONE`] when passed in `config`).
    stream: u8,
    /// A `_ptsz` entry point: a NULL stream is the calling thread's default stream.
    per_thread: bool,
    /// A runtime launch: `func` is the host stub (or `cudaKernel_t`) and `config` a
    /// `cudaLaunchConfig_t`, not a `CUfunction` and a `CUlaunchConfig`.
    runtime: bool,
}

impl Default for LaunchRule {
    fn default() -> Self {
        Self {
            active: false,
            func: NONE,
            params: NONE,
            config: NONE,
            geometry: [NONE; 6],
            stream: NONE,
            per_thread: false,
            runtime: false,
        }
    }
}

const NONE: u8 = u8::MAX;

/// Where the launch-time dispatch comes from and what it carries (`OFFTRACE_CUDA_LAUNCH_ARGS`).
/// `callbacks` and `noargs` exist to measure which part of a launch costs what
/// (`scripts/cuda/overhead-ablation.sh`).
///
/// CUPTI delivers a runtime launch twice: `cudaLaunchKernel` and the `cuLaunchKernel` the
/// runtime makes inside it (both at enter and exit), and a delivery costs the launching thread
/// more than the backend's record (docs/cuda.md, "Overhead", runs P and R). By default every
/// dispatch comes from the driver launch callbacks (each runtime launch delivered twice; every
/// launch, driver-only ones included, with its arguments and allocation properties).
/// `OFFTRACE_CUDA_LAUNCH_ARGS=runtime` takes the dispatch from the runtime launch callback,
/// which is delivered anyway as the launching API call; the driver launch callbacks are then on
/// only while a runtime launch's kernel is being learnt ([`LEARNING`]). Launches made without
/// the runtime (PyTorch's NVRTC/jiterator kernels, libraries calling the driver) then come from
/// CUPTI's API activity records of the driver launch functions alone
/// (`cuptiActivityEnableDriverApi`): the launching call is in the trace and its kernels carry
/// its correlation id, but it has no arguments and no launch-time dispatch (so no kernel
/// allocation properties) unless it came while the driver launch callbacks were on for
/// learning. Run T measured no gain on the median step from it, hence not the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LaunchMode {
    /// `runtime`: the launch-time `KERNEL_DISPATCH` with the kernel's pointer-sized parameters,
    /// from the runtime launch callbacks (each runtime launch delivered once).
    Full,
    /// The same from the driver launch callbacks, every launch (default).
    Driver,
    /// `0`: no launch callbacks at all (no launch-time dispatch, no allocation properties).
    Off,
    /// `callbacks`: CUPTI's launch callbacks enabled, nothing done in them.
    CallbacksOnly,
    /// `noargs`: the launch-time dispatch without kernel parameters (no allocation match).
    NoArgs,
}

impl LaunchMode {
    fn parse(v: Option<&str>) -> LaunchMode {
        match v.map(str::trim) {
            Some("0") => LaunchMode::Off,
            Some("runtime") => LaunchMode::Full,
            Some("callbacks") => LaunchMode::CallbacksOnly,
            Some("noargs") => LaunchMode::NoArgs,
            // The default: run T measured no gain on the median step from delivering each
            // launch once (docs/cuda.md, "Overhead"), and that mode leaves some launches
            // without kernel parameters; every launch keeps them here.
            _ => LaunchMode::Driver,
        }
    }

    /// The dispatch comes from the runtime launch callbacks (the driver's only for launches
    /// made outside a runtime call).
    fn runtime_dispatch(self) -> bool {
        matches!(self, LaunchMode::Full | LaunchMode::NoArgs | LaunchMode::CallbacksOnly)
    }

    /// The driver launch callbacks are enabled (else driver-only launches come from CUPTI's
    /// API activity records).
    fn driver_callbacks(self) -> bool {
        self == LaunchMode::Driver
    }
}

fn launch_mode() -> LaunchMode {
    // The range profiler batches kernels at the driver's launch callbacks
    // (`range_query_enter`, `record_launch`): it keeps them.
    if crate::range_query::armed() {
        return LaunchMode::Driver;
    }
    LaunchMode::parse(std::env::var("OFFTRACE_CUDA_LAUNCH_ARGS").ok().as_deref())
}

fn alloc_rules(domain: ApiDomain) -> Box<[AllocRule]> {
    use offtrace_core::MemoryType as M;
    let mut rules = vec![AllocRule::default(); MAX_CBID].into_boxed_slice();
    // (function name, op, pointer param, size param, memory type)
    let specs: &[(&str, u8, &str, &str, M)] = match domain {
        ApiDomain::Driver => &[
            ("cuMemAlloc_v2", 1, "dptr", "bytesize", M::Device),
            ("cuMemAllocAsync", 1, "dptr", "bytesize", M::Device),
            ("cuMemAllocAsync_ptsz", 1, "dptr", "bytesize", M::Device),
            ("cuMemAllocFromPoolAsync", 1, "dptr", "bytesize", M::Device),
            ("cuMemAllocFromPoolAsync_ptsz", 1, "dptr", "bytesize", M::Device),
            ("cuMemAllocManaged", 1, "dptr", "bytesize", M::Shared),
            ("cuMemAllocHost_v2", 1, "pp", "bytesize", M::Host),
            ("cuMemHostAlloc", 1, "pp", "bytesize", M::Host),
            ("cuMemAllocPitch_v2", 1, "dptr", "", M::Device),
            ("cuMemFree_v2", 2, "dptr", "", M::Unknown),
            ("cuMemFreeAsync", 2, "dptr", "", M::Unknown),
            ("cuMemFreeAsync_ptsz", 2, "dptr", "", M::Unknown),
            ("cuMemFreeHost", 2, "p", "", M::Unknown),
        ],
        ApiDomain::Runtime => &[
            ("cudaMalloc", 1, "devPtr", "size", M::Device),
            ("cudaMallocAsync", 1, "devPtr", "size", M::Device),
            ("cudaMallocAsync_ptsz", 1, "devPtr", "size", M::Device),
            ("cudaMallocFromPoolAsync", 1, "ptr", "size", M::Device),
            ("cudaMallocFromPoolAsync_ptsz", 1, "ptr", "size", M::Device),
            ("cudaMallocManaged", 1, "devPtr", "size", M::Shared),
            ("cudaMallocHost", 1, "ptr", "size", M::Host),
            ("cudaHostAlloc", 1, "pHost", "size", M::Host),
            ("cudaMallocPitch", 1, "devPtr", "", M::Device),
            ("cudaFree", 2, "devPtr", "", M::Unknown),
            ("cudaFreeAsync", 2, "devPtr", "", M::Unknown),
            ("cudaFreeAsync_ptsz", 2, "devPtr", "", M::Unknown),
            ("cudaFreeHost", 2, "ptr", "", M::Unknown),
        ],
    };
    for f in domain.functions() {
        let Some(&(_, op, ptr, size, ty)) = specs.iter().find(|s| s.0 == f.name) else { continue };
        let idx = |n: &str| table::param_index(f, n).map_or(NONE, |i| i as u8);
        let r = AllocRule {
            op,
            ptr: idx(ptr),
            size: if size.is_empty() { NONE } else { idx(size) },
            pitch: idx("pPitch").min(idx("pitch")),
            height: idx("Height").min(idx("height")),
            memory_type: ty as u8,
        };
        if r.ptr != NONE && (f.id as usize) < MAX_CBID {
            rules[f.id as usize] = r;
        }
    }
    rules
}

fn launch_rules(domain: ApiDomain) -> Box<[LaunchRule]> {
    let mut rules = vec![LaunchRule::default(); MAX_CBID].into_boxed_slice();
    let geometry_names = match domain {
        ApiDomain::Driver => ["gridDimX", "gridDimY", "gridDimZ", "blockDimX", "blockDimY", "blockDimZ"],
        ApiDomain::Runtime => ["gridDim.x", "gridDim.y", "gridDim.z", "blockDim.x", "blockDim.y", "blockDim.z"],
    };
    let specs: &[(&str, &str, &str)] = match domain {
        ApiDomain::Driver => &[
            ("cuLaunchKernel", "f", "kernelParams"),
            ("cuLaunchKernel_ptsz", "f", "kernelParams"),
            ("cuLaunchKernelEx", "f", "kernelParams"),
            ("cuLaunchKernelEx_ptsz", "f", "kernelParams"),
            ("cuLaunchCooperativeKernel", "f", "kernelParams"),
            ("cuLaunchCooperativeKernel_ptsz", "f", "kernelParams"),
        ],
        // The host stub is learnt from the driver launch inside ([`learn_stub`]); `args` is the
        // same array of pointers to the parameters as the driver's `kernelParams`.
        ApiDomain::Runtime => &[
            ("cudaLaunchKernel", "func", "args"),
            ("cudaLaunchKernel_ptsz", "func", "args"),
            ("cudaLaunchKernelExC", "func", "args"),
            ("cudaLaunchKernelExC_ptsz", "func", "args"),
            ("cudaLaunchCooperativeKernel", "func", "args"),
            ("cudaLaunchCooperativeKernel_ptsz", "func", "args"),
        ],
    };
    for f in domain.functions() {
        let Some(&(_, func, params)) = specs.iter().find(|s| s.0 == f.name) else { continue };
        if let (Some(a), Some(b)) = (table::param_index(f, func), table::param_index(f, params))
            && (f.id as usize) < MAX_CBID
        {
            let idx = |n: &str| table::param_index(f, n).map_or(NONE, |i| i as u8);
            let mut geometry = [NONE; 6];
            for (g, n) in geometry.iter_mut().zip(geometry_names) {
                *g = idx(n);
            }
            rules[f.id as usize] = LaunchRule {
                active: true,
                func: a as u8,
                params: b as u8,
                config: idx("config"),
                geometry,
                stream: idx("hStream").min(idx("stream")),
                per_thread: f.name.ends_with("_ptsz"),
                runtime: domain == ApiDomain::Runtime,
            };
        }
    }
    rules
}

const CAPTURE_BEGIN: u8 = 1;
const CAPTURE_END: u8 = 2;

/// The functions that begin and end a stream capture, by callback id.
fn capture_rules(domain: ApiDomain) -> Box<[u8]> {
    let mut rules = vec![0u8; MAX_CBID].into_boxed_slice();
    for f in domain.functions() {
        let base = f.name.trim_start_matches("cuda").trim_start_matches("cu");
        let rule = if base.starts_with("StreamBeginCapture") {
            CAPTURE_BEGIN
        } else if base.starts_with("StreamEndCapture") {
            CAPTURE_END
        } else {
            continue;
        };
        if let Some(r) = rules.get_mut(f.id as usize) {
            *r = rule;
        }
    }
    rules
}

/// Stream captures in progress in the process, by the begin and end calls the callbacks saw: a
/// launch asks the driver whether its stream is capturing only while this is not 0.
static CAPTURES: AtomicU32 = AtomicU32::new(0);

/// `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED` / `cudaErrorStreamCaptureInvalidated`: the end call
/// failed, but the capture is over.
const CAPTURE_INVALIDATED: i32 = 901;

/// A begin or end of a stream capture returned `result`.
fn note_capture(rule: u8, result: i32) {
    if rule == CAPTURE_BEGIN && result == 0 {
        // Relaxed: a hint read by launches on their own; a launch racing the begin on another
        // thread is not in that capture.
        CAPTURES.fetch_add(1, Ordering::Relaxed);
    } else if rule == CAPTURE_END && (result == 0 || result == CAPTURE_INVALIDATED) {
        let _ = CAPTURES.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

/// Whether some stream capture is in progress in the process.
fn capture_in_progress() -> bool {
    // Relaxed: see note_capture.
    CAPTURES.load(Ordering::Relaxed) != 0
}

/// Whether a launch into `stream` was captured into a CUDA graph rather than enqueued: it runs
/// only when the graph is launched, as that launch's work. Asked of the driver only while a
/// capture is in progress.
fn launch_captured(inj: &Injection, stream: u64, per_thread: bool) -> bool {
    if !capture_in_progress() {
        return false;
    }
    let Some(is_capturing) = inj.driver.stream_is_capturing else { return false };
    let handle = match stream {
        // CU_STREAM_PER_THREAD: a _ptsz launch's stream 0.
        0 if per_thread => 2,
        // The legacy stream is never captured, and asking about it while another stream
        // captures in global mode is an error the program could be made to see.
        0 | 1 => return false,
        s => s,
    };
    let mut status = 0u32;
    let was_busy = BUSY.try_with(|b| b.replace(true)).unwrap_or(true);
    // SAFETY: cuStreamIsCapturing's C signature; the stream is the handle a successful launch
    // just used; status is a valid out-pointer.
    let r = unsafe { is_capturing(handle as usize as *mut c_void, &mut status) };
    let _ = BUSY.try_with(|b| b.set(was_busy));
    // CU_STREAM_CAPTURE_STATUS_ACTIVE or _INVALIDATED: not enqueued.
    r == 0 && status != 0
}

type ParamInfoFn = unsafe extern "C" fn(*mut c_void, usize, *mut usize, *mut usize) -> i32;
type NameFn = unsafe extern "C" fn(*mut *const c_char, *mut c_void) -> i32;

/// The CUDA driver functions the backend calls itself (kernel parameter layout and name).
#[derive(Debug, Default)]
struct DriverFns {
    /// `cuFuncGetParamInfo(CUfunction, size_t index, size_t* offset, size_t* size)` (12.4+).
    func_param_info: Option<ParamInfoFn>,
    /// `cuKernelGetParamInfo(CUkernel, ...)`, same shape.
    kernel_param_info: Option<ParamInfoFn>,
    /// `cuFuncGetName(const char**, CUfunction)` (12.3+).
    func_name: Option<NameFn>,
    /// `cuKernelGetName(const char**, CUkernel)`.
    kernel_name: Option<NameFn>,
    /// `cuDeviceGetName(char*, int, CUdevice)`.
    device_name: Option<unsafe extern "C" fn(*mut c_char, i32, i32) -> i32>,
    /// `cuGraphNodeGetType(CUgraphNode, CUgraphNodeType*)`.
    graph_node_type: Option<GraphNodeTypeFn>,
    /// `cuStreamIsCapturing(CUstream, CUstreamCaptureStatus*)`.
    stream_is_capturing: Option<unsafe extern "C" fn(*mut c_void, *mut u32) -> i32>,
}

type GraphNodeTypeFn = unsafe extern "C" fn(*mut c_void, *mut u32) -> i32;

fn resolve_driver_fns() -> DriverFns {
    let sym = |name: &CStr| -> *mut c_void {
        // SAFETY: RTLD_NOLOAD only returns a library already loaded (the driver loaded us);
        // names are NUL-terminated.
        unsafe {
            let h = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
            let h = if h.is_null() { libc::RTLD_DEFAULT } else { h };
            libc::dlsym(h, name.as_ptr())
        }
    };
    macro_rules! f {
        ($name:literal) => {{
            let p = sym($name);
            // SAFETY: the symbol is the CUDA driver function of that name, whose C signature
            // (cuda.h) is the field's type.
            (!p.is_null()).then(|| unsafe { cupti::fn_ptr(p) })
        }};
    }
    DriverFns {
        func_param_info: f!(c"cuFuncGetParamInfo"),
        kernel_param_info: f!(c"cuKernelGetParamInfo"),
        func_name: f!(c"cuFuncGetName"),
        kernel_name: f!(c"cuKernelGetName"),
        device_name: f!(c"cuDeviceGetName"),
        graph_node_type: f!(c"cuGraphNodeGetType"),
        stream_is_capturing: f!(c"cuStreamIsCapturing"),
    }
}

fn say(msg: &str) {
    if std::env::var_os("OFFTRACE_QUIET").is_none() {
        eprintln!("offtrace: {msg}");
    }
}

/// Starts the injection (idempotent; the first call does the work). Returns whether CUDA is
/// traced. Never panics into the caller.
pub fn start() -> bool {
    if STARTED.swap(true, Ordering::AcqRel) {
        return INJECTION.get().is_some_and(|i| i.ownership == Ownership::Offtrace);
    }
    match catch_unwind(start_inner) {
        Ok(Ok(inj)) => {
            let on = inj.ownership == Ownership::Offtrace;
            let _ = INJECTION.set(inj);
            // SAFETY: registering a plain extern "C" function with libc's atexit.
            unsafe { libc::atexit(at_exit) };
            if on {
                start_flusher();
            }
            on
        }
        Ok(Err(msg)) => {
            say(&msg);
            false
        }
        Err(_) => {
            say("CUDA backend failed to start (internal error); the program runs untraced");
            false
        }
    }
}

fn start_inner() -> Result<Injection, String> {
    let c = cupti::load().map_err(|e| e.to_string())?;
    // offtrace-metrics' CUPTI groups (PM sampling, the range profiler) call this same copy.
    offtrace_metrics::cupti::prefer_library(c.path);
    emit::register_api_tables();
    // Before the tools load: a tool may push an external id in its initialisation.
    offtrace_core::set_external_correlation_hook(mirror_external);
    // Tools (`OFFTRACE_TOOLS`, `offtrace record --tool`) configure their services before CUPTI
    // is set up: a tool that wants CUDA_DRIVER_API gets every driver callback enabled.
    match offtrace::tools::load_tools_from_env() {
        Ok(_) => {}
        Err(e) => say(&format!("a tool failed to load: {e}")),
    }
    let recorder = start_recorder(&c);
    if recorder.is_some() {
        // `record --metrics`: sampled into this trace (CUPTI groups from the first context).
        crate::metrics::start_from_env(say);
        // `record --query-metrics cupti.range_profiler`: per-kernel values from the first context.
        crate::range_query::start_from_env(say, offtrace_metrics::cupti::object_of(c.subscribe as usize));
    }
    let mut sub: SubscriberHandle = std::ptr::null_mut();
    let mut old_name = [0u8; 128];
    let r = match c.subscribe_v2 {
        Some(v2) => {
            // CUpti_SubscriberParams at the generated offsets.
            let mut params = [0u8; l::CUpti_SubscriberParams::SIZE];
            let put =
                |p: &mut [u8], (off, _): (usize, usize), v: u64| p[off..off + 8].copy_from_slice(&v.to_le_bytes());
            put(&mut params, l::CUpti_SubscriberParams::structSize, l::CUpti_SubscriberParams::SIZE as u64);
            put(&mut params, l::CUpti_SubscriberParams::subscriberName, c"offtrace".as_ptr() as u64);
            put(&mut params, l::CUpti_SubscriberParams::oldSubscriberName, old_name.as_mut_ptr() as u64);
            put(&mut params, l::CUpti_SubscriberParams::oldSubscriberSize, old_name.len() as u64);
            // SAFETY: valid out-pointer, callback and params struct of the header's layout.
            unsafe { v2(&mut sub, on_callback, std::ptr::null_mut(), params.as_mut_ptr().cast()) }
        }
        // SAFETY: valid out-pointer and callback.
        None => unsafe { (c.subscribe)(&mut sub, on_callback, std::ptr::null_mut()) },
    };
    if r != 0 {
        let other =
            CStr::from_bytes_until_nul(&old_name).ok().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let other = if other.is_empty() { "another CUPTI client".to_string() } else { other };
        if cupti::is_multiple_subscribers(r) {
            say(&format!(
                "CUPTI is already taken by {other}; CUDA is not traced by offtrace in this process (that tool keeps CUPTI)"
            ));
            let inj = Injection::new(c, 0, Ownership::Other(other), 0);
            *inj.recorder.lock().unwrap_or_else(|e| e.into_inner()) = recorder;
            return Ok(inj);
        }
        return Err(format!("cuptiSubscribe failed: {}; CUDA tracing is off", c.result_string(r)));
    }
    // Resource callbacks (contexts, streams, modules, graphs) always: they are rare and define
    // what the device records refer to.
    // SAFETY: sub is the live subscriber.
    let r = unsafe { (c.enable_domain)(1, sub, l::CUPTI_CB_DOMAIN_RESOURCE as u32) };
    if r != 0 {
        say(&format!("cuptiEnableDomain(resource) failed: {}", c.result_string(r)));
    }
    let plan = Plan::from_env();
    plan.apply_callbacks(&c, sub);
    // Device timestamps on the trace clock: CUPTI asks this function for the host time it
    // interpolates GPU timestamps to. Without it (older CUPTI), CUPTI uses CLOCK_REALTIME and
    // records are shifted by the offset measured here.
    let offset = match c.activity_register_timestamp_callback {
        // SAFETY: a plain extern "C" fn() -> u64, registered before any kind is enabled.
        Some(f) if unsafe { f(trace_clock) } == 0 => 0,
        _ => {
            let rt = offtrace_core::clock::realtime_ns() as i64;
            let mono = offtrace_core::clock::monotonic_ns() as i64;
            mono - rt
        }
    };
    declare_zeroed_buffers(&c);
    // SAFETY: plain extern "C" callbacks of the documented signatures.
    let r = unsafe { (c.activity_register_callbacks)(buffer_requested, buffer_completed) };
    if r != 0 {
        return Err(format!("cuptiActivityRegisterCallbacks failed: {}", c.result_string(r)));
    }
    // OFFTRACE_CUDA_DEVICE_BUFFER_MB: the size of CUPTI's device-side record buffers (CUPTI's
    // default otherwise); for measuring whether their flushes cost the program time.
    if let Some(mb) = std::env::var("OFFTRACE_CUDA_DEVICE_BUFFER_MB").ok().and_then(|v| v.parse::<usize>().ok()) {
        let mut bytes = mb << 20;
        let mut len = std::mem::size_of::<usize>();
        // SAFETY: a size_t value and its size, as the attribute takes.
        let r = unsafe {
            (c.activity_set_attribute)(
                l::CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE as u32,
                &mut len,
                (&mut bytes as *mut usize).cast(),
            )
        };
        if r != 0 {
            say(&format!("cuptiActivitySetAttribute(DEVICE_BUFFER_SIZE) failed: {}", c.result_string(r)));
        }
    }
    let inj = Injection::new(c, sub as usize, Ownership::Offtrace, offset);
    *inj.recorder.lock().unwrap_or_else(|e| e.into_inner()) = recorder;
    let plan = if crate::range_query::armed() && plan.activity && !activity_kinds().is_empty() {
        // On the H100 (CUDA 13.0) CUPTI's own activity thread crashed (SIGSEGV, or glibc's
        // "free(): invalid pointer") in a program whose copies, memsets and kernels it traced
        // while the range profiler ran (docs/metrics.md): the range profiler runs alone.
        say(crate::range_query::NO_ACTIVITY_MESSAGE);
        Plan { activity: false, ..plan }
    } else {
        plan.apply_activity(&inj.cupti);
        plan
    };
    *inj.plan.lock().unwrap_or_else(|e| e.into_inner()) = (plan, plan);
    Ok(inj)
}

/// Starts the recorder when `OFFTRACE_OUTPUT` names a trace file (`offtrace record` sets it):
/// the injection hosts it, as the agent does for SYCL programs. Returns its services context.
fn start_recorder(c: &Cupti) -> Option<offtrace_core::ContextId> {
    // OFFTRACE_CUDA_OUTPUT: `offtrace record` gives the CUDA backend its own file when the
    // program also loads the SYCL agent (each backend hosts its own recorder).
    let path = ["OFFTRACE_CUDA_OUTPUT", "OFFTRACE_OUTPUT"]
        .iter()
        .find_map(|v| std::env::var_os(v).filter(|p| !p.is_empty()))?;
    let command = std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&x| x == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let pid = std::process::id().to_string();
    let version = c.api_version.to_string();
    let info = [
        ("command", command.as_str()),
        ("pid", pid.as_str()),
        ("backend", "cuda"),
        ("cupti", c.path),
        ("cupti_api_version", version.as_str()),
        ("agent_version", env!("CARGO_PKG_VERSION")),
    ];
    let lossless = std::env::var("OFFTRACE_LOSSLESS").is_ok_and(|v| v == "1");
    let config = offtrace_recorder::Config::default()
        .with_lossless(lossless)
        .with_crash_flush(offtrace_recorder::crash_flush_wanted());
    // The first traced process writes the path, every later one `<path>.<pid>`.
    if let Err(e) = offtrace_recorder::start_claimed(config, std::path::Path::new(&path), &info) {
        say(&format!("cannot write the trace {}: {e}", std::path::Path::new(&path).display()));
        return None;
    }
    match offtrace_recorder::subscribe(false) {
        Ok(ctx) => Some(ctx),
        Err(e) => {
            say(&format!("the recorder could not subscribe to the tracing services: {e:?}"));
            let _ = offtrace_recorder::finish();
            None
        }
    }
}

/// Whether every driver API call is traced (`OFFTRACE_CUDA_DRIVER_API=1`). Otherwise the driver
/// functions the backend reads (launches, allocations, frees) are, and their calls become
/// `CUDA_DRIVER_API` records only where no runtime call encloses them (a library such as cuBLAS
/// calling the driver directly): inside a runtime call they are its implementation.
fn driver_api_wanted() -> bool {
    std::env::var("OFFTRACE_CUDA_DRIVER_API").is_ok_and(|v| v == "1")
}

/// `OFFTRACE_CUDA_ALL_CALLS=1`: also the runtime's state queries ([`STATE_QUERIES`]).
fn all_calls() -> bool {
    std::env::var("OFFTRACE_CUDA_ALL_CALLS").is_ok_and(|v| v == "1")
}

/// Which CUPTI callbacks and activity kinds are on. The start's comes from the environment
/// ([`Plan::from_env`]); [`measure_phase`] switches between it and parts of it inside one
/// process, to measure what each part costs the program's threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Plan {
    /// Runtime API callbacks (less [`STATE_QUERIES`] unless `OFFTRACE_CUDA_ALL_CALLS=1`).
    pub runtime: bool,
    /// Driver API callbacks: every one with `OFFTRACE_CUDA_DRIVER_API=1`, else allocations,
    /// frees and (unless `OFFTRACE_CUDA_LAUNCH_ARGS=0`) launches.
    pub driver: bool,
    /// The activity kinds of `OFFTRACE_CUDA_ACTIVITY`.
    pub activity: bool,
    /// Callbacks are delivered and return at once (CUPTI's own cost of a callback).
    pub empty: bool,
}

impl Plan {
    /// `OFFTRACE_CUDA_API`: unset or `1` runtime and driver callbacks; `0` no runtime callbacks;
    /// `none` no API callbacks at all (activity records only, no launch-time dispatch, no
    /// allocations); `empty` the default callbacks, doing nothing (for measuring).
    pub fn parse(api: Option<&str>) -> Plan {
        let on = Plan { runtime: true, driver: true, activity: true, empty: false };
        match api.map(str::trim) {
            Some("0") => Plan { runtime: false, ..on },
            Some("none") => Plan { runtime: false, driver: false, ..on },
            Some("empty") => Plan { empty: true, ..on },
            _ => on,
        }
    }

    fn from_env() -> Plan {
        Plan::parse(std::env::var("OFFTRACE_CUDA_API").ok().as_deref())
    }

    /// The plan of measurement phase `phase` given the start's ([`measure_phase`]).
    pub fn phase(started: Plan, phase: u32) -> Option<Plan> {
        let off = Plan::default();
        Some(match phase {
            0 => off,
            1 => started,
            2 => Plan { activity: started.activity, ..off },
            3 => Plan { empty: true, ..started },
            4 => Plan { driver: false, ..started },
            5 => Plan { activity: false, ..started },
            6 => Plan { runtime: false, ..started },
            _ => return None,
        })
    }

    /// Turns the API callbacks of this plan on and the others off.
    fn apply_callbacks(&self, c: &Cupti, sub: SubscriberHandle) {
        // Relaxed: a flag read by each callback on its own; a callback racing the switch may
        // still do (or skip) its work once, which a measurement phase tolerates.
        EMPTY_CALLBACKS.store(self.empty, Ordering::Relaxed);
        // SAFETY: sub is the live subscriber; the domain is a CUPTI callback domain.
        let r = unsafe { (c.enable_domain)(u32::from(self.runtime), sub, l::CUPTI_CB_DOMAIN_RUNTIME_API as u32) };
        if r != 0 {
            say(&format!("cuptiEnableDomain(runtime) failed: {}", c.result_string(r)));
        }
        if self.runtime && !all_calls() {
            for f in ApiDomain::Runtime.functions() {
                let base = f.name.trim_end_matches("_ptsz").trim_end_matches("_ptds");
                if STATE_QUERIES.contains(&base) {
                    // SAFETY: sub is the live subscriber; f.id is a runtime callback id.
                    unsafe { (c.enable_callback)(0, sub, l::CUPTI_CB_DOMAIN_RUNTIME_API as u32, f.id) };
                }
            }
        }
        // The driver domain doubles the callbacks of a runtime program (each runtime call makes
        // one or more driver calls): all of it only when asked for, else the functions the
        // backend reads (allocations, frees, launches).
        if driver_api_wanted() {
            // SAFETY: sub is the live subscriber; the domain is a CUPTI callback domain.
            unsafe { (c.enable_domain)(u32::from(self.driver), sub, l::CUPTI_CB_DOMAIN_DRIVER_API as u32) };
        } else {
            let allocs = alloc_rules(ApiDomain::Driver);
            let launches = launch_rules(ApiDomain::Driver);
            let captures = capture_rules(ApiDomain::Driver);
            // The driver's launch callbacks with OFFTRACE_CUDA_LAUNCH_ARGS=driver (and for the
            // range profiler), and by default while runtime launches' kernels are learnt (from
            // the start; the flusher turns them off): the runtime's launch callback gives the
            // dispatch and driver-only launches come from API activity records ([`LaunchMode`]).
            let mode = launch_mode();
            let learning = mode.runtime_dispatch() && self.driver && !self.empty;
            // Relaxed: see tune_learning.
            LEARNING.store(learning, Ordering::Relaxed);
            let launch_args = mode.driver_callbacks() || learning;
            // The range profiler starts at launches and keeps other work (memsets, copies, graph
            // launches) out of their batches: those callbacks too while it is asked for.
            let rangeq = crate::range_query::armed();
            for cbid in 0..MAX_CBID {
                let other_work = rangeq
                    && ApiDomain::Driver
                        .function(cbid as u32)
                        .is_some_and(|f| crate::range_query::is_other_work(f.name));
                if allocs[cbid].op != 0
                    || (launches[cbid].active && (launch_args || rangeq))
                    || other_work
                    || captures[cbid] != 0
                {
                    // SAFETY: sub is the live subscriber; cbid is a driver callback id.
                    unsafe {
                        (c.enable_callback)(
                            u32::from(self.driver),
                            sub,
                            l::CUPTI_CB_DOMAIN_DRIVER_API as u32,
                            cbid as u32,
                        )
                    };
                }
            }
        }
    }

    /// Enables this plan's activity kinds, or disables them.
    fn apply_activity(&self, c: &Cupti) {
        for k in activity_kinds() {
            // SAFETY: enabling or disabling an activity kind has no memory preconditions.
            let r =
                unsafe { if self.activity { (c.activity_enable)(*k as u32) } else { (c.activity_disable)(*k as u32) } };
            if r != 0 {
                say(&format!("cuptiActivityEnable/Disable({k}) failed: {}", c.result_string(r)));
            }
        }
        self.apply_driver_launch_records(c);
    }

    /// The API activity records of the driver's launch functions, which give a launch made
    /// without the runtime its launching call ([`LaunchMode`]): on while the plan has activity
    /// and driver callbacks (a launch whose callback was delivered too, while kernels are
    /// learnt, is recorded once: its correlation id is known when its API record comes).
    fn apply_driver_launch_records(&self, c: &Cupti) {
        let ids = driver_launch_record_ids(launch_mode(), driver_api_wanted());
        let Some(enable) = c.activity_enable_driver_api else {
            if !ids.is_empty() && self.activity {
                say(
                    "cuptiActivityEnableDriverApi is missing (CUPTI before 12.6): launches made without the CUDA runtime have no launching call in the trace (OFFTRACE_CUDA_LAUNCH_ARGS=driver gives them one)",
                );
            }
            return;
        };
        let on = u8::from(self.activity && self.driver);
        for id in ids {
            // SAFETY: id is a driver callback id; the call has no memory preconditions.
            let r = unsafe { enable(id, on) };
            if r != 0 {
                say(&format!("cuptiActivityEnableDriverApi({id}) failed: {}", c.result_string(r)));
            }
        }
    }
}

/// Set while the plan says callbacks return at once ([`Plan::empty`]).
static EMPTY_CALLBACKS: AtomicBool = AtomicBool::new(false);

/// The driver launch functions whose API activity records are enabled: those of the driver
/// launch rules when the dispatch comes from the runtime and no callback covers the driver's
/// launches (neither its launch callbacks nor `OFFTRACE_CUDA_DRIVER_API=1`'s whole domain).
fn driver_launch_record_ids(mode: LaunchMode, driver_all: bool) -> Vec<u32> {
    if !mode.runtime_dispatch() || driver_all {
        return Vec::new();
    }
    let rules = launch_rules(ApiDomain::Driver);
    (0..rules.len()).filter(|&i| rules[i].active).map(|i| i as u32).collect()
}

/// For measuring, inside one process, what each part of the backend costs the program's
/// threads (`examples/cuda/train.py --ab`, `scripts/cuda/overhead-ablation.sh` mode `ab`):
/// switches CUPTI's callbacks and activity kinds to phase `phase` of the start's plan: 0 none
/// (CUPTI stays subscribed), 1 the start's, 2 activity only, 3 the start's callbacks returning
/// at once, 4 no driver callbacks, 5 no activity kinds, 6 no runtime callbacks. Call it between
/// steps, with the device idle and no CUDA call in flight on another thread (a call open
/// across a switch loses its enter or exit record; device records of calls made while
/// callbacks were off carry correlation 0). Returns false when offtrace does not own CUPTI or
/// the phase is unknown.
pub fn measure_phase(phase: u32) -> bool {
    let Some(inj) = get() else { return false };
    if inj.ownership != Ownership::Offtrace {
        return false;
    }
    let mut plans = inj.plan.lock().unwrap_or_else(|e| e.into_inner());
    let Some(new) = Plan::phase(plans.0, phase) else { return false };
    let cur = plans.1;
    if (new.runtime, new.driver, new.empty) != (cur.runtime, cur.driver, cur.empty) {
        new.apply_callbacks(&inj.cupti, inj.subscriber as SubscriberHandle);
    }
    if (new.activity, new.driver) != (cur.activity, cur.driver) {
        new.apply_activity(&inj.cupti);
    }
    plans.1 = new;
    true
}

/// Runtime functions that only read state and that frameworks call thousands of times per step
/// (PyTorch: ~3,900 `cudaGetDevice` per training step of `examples/cuda/train.py`, 85 % of its
/// runtime calls). Not traced unless `OFFTRACE_CUDA_ALL_CALLS=1`: a CUPTI callback costs about
/// a microsecond, more than the function. torch.profiler leaves the same ones out.
pub const STATE_QUERIES: &[&str] = &[
    "cudaGetDevice",
    "cudaGetDeviceCount",
    "cudaGetLastError",
    "cudaPeekAtLastError",
    "cudaGetErrorString",
    "cudaGetErrorName",
    "cudaDeviceGetAttribute",
    "cudaGetDeviceProperties",
    "cudaFuncGetAttributes",
    "cudaStreamIsCapturing",
    "cudaStreamGetCaptureInfo",
    "cudaThreadExchangeStreamCaptureMode",
    "cudaOccupancyMaxActiveClusters",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
    "cudaPointerGetAttributes",
    "cudaDriverGetVersion",
    "cudaRuntimeGetVersion",
    "cudaGetDriverEntryPoint",
    "cudaGetDriverEntryPointByVersion",
    "cudaStreamGetPriority",
    "cudaStreamGetFlags",
    "cudaStreamGetDevice",
    "cudaCtxGetDevice",
];

/// The activity kinds the backend enables: [`DEFAULT_ACTIVITY`], or those
/// `OFFTRACE_CUDA_ACTIVITY` names (comma-separated: kernel, memcpy, memset, sync, memory, pool,
/// marker, extcorr, overhead; `all` for every kind of [`ACTIVITY_KINDS`]).
fn activity_kinds() -> Vec<&'static i64> {
    kinds_named(&std::env::var("OFFTRACE_CUDA_ACTIVITY").unwrap_or_else(|_| DEFAULT_ACTIVITY.to_string()))
}

fn kinds_named(list: &str) -> Vec<&'static i64> {
    let names = ["kernel", "memcpy", "memcpy", "memset", "sync", "memory", "pool", "marker", "extcorr", "overhead"];
    ACTIVITY_KINDS
        .iter()
        .zip(names)
        .filter(|(_, n)| list.split(',').any(|w| w.trim() == *n || w.trim() == "all"))
        .map(|(k, _)| k)
        .collect()
}

/// The kinds enabled unless `OFFTRACE_CUDA_ACTIVITY` says otherwise: kernels, copies and
/// memsets. Every other kind is opt-in because on the H100 it made the launching threads slower
/// on `train.py` (a launch-bound step): with `sync,marker,overhead` added, `offtrace record` ran
/// +30 % per step against +7 % without (run E3, 7 interleaved processes each); with every kind,
/// +44 % against +11 % (run E2). `memory` and `pool` (`MEMORY2`, `MEMORY_POOL`) add nothing to
/// the trace (allocations come from the API callbacks); `extcorr` needs CUPTI's API activity
/// records, which are not enabled (external ids reach device records through [`external`]).
const DEFAULT_ACTIVITY: &str = "kernel,memcpy,memset";

/// The activity kinds the backend can enable.
const ACTIVITY_KINDS: &[i64] = &[
    l::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    l::CUPTI_ACTIVITY_KIND_MEMCPY,
    l::CUPTI_ACTIVITY_KIND_MEMCPY2,
    l::CUPTI_ACTIVITY_KIND_MEMSET,
    l::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    l::CUPTI_ACTIVITY_KIND_MEMORY2,
    l::CUPTI_ACTIVITY_KIND_MEMORY_POOL,
    l::CUPTI_ACTIVITY_KIND_MARKER,
    l::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    l::CUPTI_ACTIVITY_KIND_OVERHEAD,
];

impl Injection {
    fn new(cupti: Cupti, subscriber: usize, ownership: Ownership, clock_offset_ns: i64) -> Self {
        let dump =
            std::env::var("OFFTRACE_CUDA_DUMP").ok().filter(|p| !p.is_empty()).and_then(|p| match Dump::open(&p) {
                Ok((d, _)) => Some(d),
                Err(e) => {
                    say(&format!("cannot write OFFTRACE_CUDA_DUMP={p}: {e}"));
                    None
                }
            });
        let counters = || (0..MAX_CBID).map(|_| AtomicU64::new(0)).collect::<Box<[_]>>();
        let launch_mode = launch_mode();
        let driver_launch_records = cupti.activity_enable_driver_api.is_some()
            && Plan::from_env().driver
            && !driver_launch_record_ids(launch_mode, driver_api_wanted()).is_empty();
        let runtime_launches = if launch_mode.runtime_dispatch() {
            launch_rules(ApiDomain::Runtime)
        } else {
            vec![LaunchRule::default(); MAX_CBID].into_boxed_slice()
        };
        let inj = Self {
            cupti,
            subscriber,
            ownership,
            clock_offset_ns,
            correlations: CorrelationMap::new(),
            stats: Stats::default(),
            per_cbid: [counters(), counters()],
            dump,
            allocation_rules: [alloc_rules(ApiDomain::Runtime), alloc_rules(ApiDomain::Driver)],
            launch_rules: [runtime_launches, launch_rules(ApiDomain::Driver)],
            capture_rules: [capture_rules(ApiDomain::Runtime), capture_rules(ApiDomain::Driver)],
            driver: resolve_driver_fns(),
            kernel_params: Mutex::new(HashMap::new()),
            defined_queues: Mutex::new(HashSet::new()),
            graph_nodes: Mutex::new(GraphNodes::default()),
            finished: AtomicBool::new(false),
            recorder: Mutex::new(None),
            plan: Mutex::new((Plan::default(), Plan::default())),
            driver_all: driver_api_wanted(),
            launch_mode,
            driver_launch_ops: Mutex::new(HashSet::new()),
            driver_launch_records,
        };
        if let Some(d) = &inj.dump {
            d.line(&format!(
                r#"{{"t":"start","cupti":{},"cupti_api_version":{},"ownership":{},"clock_offset_ns":{},"timestamp_callback":{}}}"#,
                dump::json_str(inj.cupti.path),
                inj.cupti.api_version,
                dump::json_str(&match &inj.ownership {
                    Ownership::Offtrace => "offtrace".to_string(),
                    Ownership::Other(o) => format!("other: {o}"),
                }),
                clock_offset_ns,
                clock_offset_ns == 0
            ));
        }
        inj
    }

    /// `OFFTRACE_CUDA_STATS=1`: one line on stderr at exit with the backend's counters and
    /// CUPTI's overhead by kind (for measurements: `scripts/cuda/overhead-ablation.sh`).
    fn print_stats(&self) {
        let s = &self.stats;
        let by: Vec<String> = s.cupti_overhead_by_kind.iter().map(|c| c.load(Ordering::Relaxed).to_string()).collect();
        eprintln!(
            r#"offtrace-cuda-stats: {{"runtime_calls":{},"driver_calls":{},"records":{},"buffers":{},"dropped":{},"cupti_overhead_ns":{},"cupti_overhead_by_kind_ns":[{}],"processing_ns":{},"driver_only_launches":{}}}"#,
            s.api_calls[0].load(Ordering::Relaxed),
            s.api_calls[1].load(Ordering::Relaxed),
            s.records.load(Ordering::Relaxed),
            s.buffers.load(Ordering::Relaxed),
            s.dropped.load(Ordering::Relaxed),
            s.cupti_overhead_ns.load(Ordering::Relaxed),
            by.join(","),
            s.processing_ns.load(Ordering::Relaxed),
            s.driver_only_launches.load(Ordering::Relaxed),
        );
    }

    fn finish_recorder(&self) {
        let ctx = self.recorder.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(ctx) = ctx {
            let _ = offtrace_core::destroy_context(ctx);
            if let Err(e) = offtrace_recorder::finish() {
                say(&format!("the trace could not be finished: {e}"));
            }
        }
    }

    /// Writes a structure record (graph node or edge, module, allocation, launch) to the dump.
    /// These come from application threads: the dump is a check, not the trace.
    fn dump_line(&self, make: impl FnOnce() -> String) {
        if let Some(d) = &self.dump {
            d.line(&make());
        }
    }

    /// Flushes CUPTI's buffers (all records so far reach the services and the dump).
    pub fn flush(&self) {
        if self.ownership == Ownership::Offtrace {
            // SAFETY: no memory preconditions; forced: also buffers still being filled.
            unsafe { (self.cupti.activity_flush_all)(l::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED as u32) };
        }
    }

    /// Ends tracing: flushes, writes the counters, stops CUPTI callbacks. Idempotent.
    pub fn finish(&self) {
        if self.finished.swap(true, Ordering::AcqRel) {
            return;
        }
        // The samplers' last samples go in before the recorder finishes.
        crate::metrics::stop();
        crate::range_query::stop();
        if self.ownership != Ownership::Offtrace {
            if let (Ownership::Other(o), Some(d)) = (&self.ownership, offtrace_recorder::definitions()) {
                d.push(offtrace_format::Record::Info { key: "cuda.cupti_owner".into(), value: o.clone() });
            }
            self.finish_recorder();
            return;
        }
        self.flush();
        for k in activity_kinds() {
            // SAFETY: as in start.
            unsafe { (self.cupti.activity_disable)(*k as u32) };
        }
        // SAFETY: the subscriber is live (finish runs once).
        unsafe { (self.cupti.unsubscribe)(self.subscriber as SubscriberHandle) };
        emit::finish(self);
        if std::env::var("OFFTRACE_CUDA_STATS").is_ok_and(|v| v == "1") {
            self.print_stats();
        }
        offtrace::tools::finalize_tools();
        self.finish_recorder();
        if let Some(d) = &self.dump {
            for (i, domain) in [ApiDomain::Runtime, ApiDomain::Driver].into_iter().enumerate() {
                for (cbid, n) in self.per_cbid[i].iter().enumerate() {
                    let n = n.load(Ordering::Relaxed);
                    if n > 0 {
                        let name = domain.function(cbid as u32).map_or("?", |f| f.name);
                        d.line(&format!(
                            r#"{{"t":"api","kind":"{}","cbid":{},"name":{},"calls":{}}}"#,
                            domain.kind_name(),
                            cbid,
                            dump::json_str(name),
                            n
                        ));
                    }
                }
            }
            let s = &self.stats;
            d.line(&format!(
                r#"{{"t":"summary","runtime_calls":{},"driver_calls":{},"records":{},"buffers":{},"dropped":{},"cupti_overhead_ns":{},"processing_ns":{},"correlation_misses":{}}}"#,
                s.api_calls[0].load(Ordering::Relaxed),
                s.api_calls[1].load(Ordering::Relaxed),
                s.records.load(Ordering::Relaxed),
                s.buffers.load(Ordering::Relaxed),
                s.dropped.load(Ordering::Relaxed),
                s.cupti_overhead_ns.load(Ordering::Relaxed),
                s.processing_ns.load(Ordering::Relaxed),
                self.correlations.misses()
            ));
            d.flush();
        }
    }
}

/// Delivers CUPTI's completed buffers regularly (`OFFTRACE_CUDA_FLUSH_MS`, default 500 ms; 0 =
/// only when full and at exit), so device records reach the services while the program runs.
fn start_flusher() {
    let ms: u64 = std::env::var("OFFTRACE_CUDA_FLUSH_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(500);
    if ms == 0 {
        return;
    }
    let _ = std::thread::Builder::new().name("offtrace-cupti".into()).spawn(move || {
        let mut unknown_stubs = 0;
        // The learning of runtime launches' kernels is looked at every LEARNING_PERIOD_MS (a
        // training loop's warm-up steps then suffice to turn the driver launch callbacks off),
        // CUPTI's buffers flushed every `ms`.
        let tick = ms.min(LEARNING_PERIOD_MS);
        let mut since_flush = 0;
        loop {
            std::thread::sleep(std::time::Duration::from_millis(tick));
            let Some(i) = get() else { return };
            if i.finished.load(Ordering::Acquire) {
                return;
            }
            tune_learning(i, &mut unknown_stubs);
            since_flush += tick;
            if since_flush < ms {
                continue;
            }
            since_flush = 0;
            // SAFETY: no memory preconditions; 0 = only buffers CUPTI completed.
            unsafe { (i.cupti.activity_flush_all)(0) };
        }
    });
}

extern "C" fn at_exit() {
    let _ = catch_unwind(|| {
        if let Some(i) = get() {
            i.finish();
        }
    });
}

/// CUPTI's host clock: the trace clock, CLOCK_MONOTONIC ns. Read with clock_gettime rather than
/// through the services' TSC line: CUPTI maps GPU time onto the host clock from a few samples,
/// and the line's rate is refined during the first seconds, which would scale every duration
/// measured against early samples.
unsafe extern "C" fn trace_clock() -> u64 {
    offtrace_core::clock::monotonic_ns()
}

/// Reads a field of a CUPTI callback struct.
///
/// # Safety
/// `base + off .. + size` must be readable.
#[inline(always)]
unsafe fn field(base: *const u8, (off, size): (usize, usize)) -> u64 {
    // SAFETY: per the caller.
    unsafe {
        match size {
            4 => u64::from(base.add(off).cast::<u32>().read_unaligned()),
            _ => base.add(off).cast::<u64>().read_unaligned(),
        }
    }
}

/// The CUPTI callback (application threads). Never unwinds.
unsafe extern "C" fn on_callback(_user: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    // Relaxed: see Plan::apply_callbacks.
    if data.is_null() || EMPTY_CALLBACKS.load(Ordering::Relaxed) {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let Some(inj) = INJECTION.get() else { return };
        if BUSY.try_with(Cell::get).unwrap_or(true) {
            return;
        }
        let d = i64::from(domain);
        // SAFETY: CUPTI passes the struct of the domain (CUpti_CallbackData for the API
        // domains, CUpti_ResourceData for resources), valid during the callback.
        unsafe {
            if d == l::CUPTI_CB_DOMAIN_RUNTIME_API {
                api_callback(inj, ApiDomain::Runtime, cbid, data.cast());
            } else if d == l::CUPTI_CB_DOMAIN_DRIVER_API {
                api_callback(inj, ApiDomain::Driver, cbid, data.cast());
            } else if d == l::CUPTI_CB_DOMAIN_RESOURCE {
                resource_callback(inj, cbid, data.cast());
            }
        }
    }));
}

/// # Safety
/// `data` is CUPTI's `CUpti_CallbackData` for `cbid` of `domain`.
unsafe fn api_callback(inj: &Injection, domain: ApiDomain, cbid: u32, data: *const u8) {
    use l::CUpti_CallbackData as cd;
    let di = domain as usize;
    // SAFETY: fields of CUpti_CallbackData (caller's guarantee).
    let (site, params, ret, cupti_corr) = unsafe {
        (
            field(data, cd::callbackSite) as i64,
            field(data, cd::functionParams) as usize as *const u8,
            field(data, cd::functionReturnValue) as usize as *const i32,
            field(data, cd::correlationId) as u32,
        )
    };
    let Some(f) = domain.function(cbid) else { return };
    if site == l::CUPTI_API_ENTER {
        // Per-function counts are the dump's (a shared line per function, written by every
        // launching thread: kept off the path unless the dump is on).
        if inj.dump.is_some()
            && let Some(c) = inj.per_cbid[di].get(cbid as usize)
        {
            // Relaxed: statistics only.
            c.fetch_add(1, Ordering::Relaxed);
        }
        inj.stats.api_calls[di].fetch_add(1, Ordering::Relaxed);
        if domain == ApiDomain::Runtime {
            let _ = RUNTIME_DEPTH.try_with(|d| d.set(d.get() + 1));
            note_thread();
            if let Some(&r) = inj.launch_rules[di].get(cbid as usize).filter(|r| r.active) {
                // SAFETY: params is f's parameter struct; r is f's launch rule.
                unsafe { note_launch_stub(inj, f, params, r) };
            }
        }
        // The range profiler decodes its batches with CUPTI calls that wait for the device, which
        // would invalidate a stream capture in progress (the program's next call fails with
        // cudaErrorStreamCaptureInvalidated): while one is, it is left alone. A capture's
        // begin ends the batch first, like other work; its end marks what ran meanwhile as
        // ranges no launch is paired with (decoded with no values, never another kernel's).
        if crate::range_query::armed()
            && !capture_in_progress()
            && inj.launch_rules[di].get(cbid as usize).is_some_and(|r| r.active)
        {
            // SAFETY: the launch's CUpti_CallbackData (caller's guarantee).
            unsafe { range_query_enter(inj, data) };
        }
        if crate::range_query::active()
            && !capture_in_progress()
            && (inj.capture_rules[di].get(cbid as usize) == Some(&CAPTURE_BEGIN)
                || crate::range_query::is_other_work(f.name))
        {
            // SAFETY: as above.
            unsafe { range_query_other(data, true) };
        }
        let rule = inj.allocation_rules[di].get(cbid as usize).copied().unwrap_or_default();
        if rule.op == 2 && owns_memory_calls(domain) {
            // SAFETY: params is f's parameter struct.
            let ptr = unsafe { arg(f, params, rule.ptr) };
            emit::memory_free(ptr);
            inj.dump_line(|| format!(r#"{{"t":"free","function":"{}","ptr":{ptr}}}"#, f.name));
        }
        // Driver calls inside a runtime call are its implementation: recorded only on request.
        let record =
            domain == ApiDomain::Runtime || inj.driver_all || RUNTIME_DEPTH.try_with(Cell::get).unwrap_or(0) == 0;
        // SAFETY: params is f's parameter struct, valid during the callback.
        let call = if record { unsafe { emit::api_enter(domain, f, params) } } else { None };
        if let Some(call) = call {
            inj.correlations.insert(cupti_corr, call.correlation());
            external::remember_call(cupti_corr);
            let _ = OPEN.try_with(|o| o.borrow_mut().push(call));
        }
    } else if site == l::CUPTI_API_EXIT {
        if crate::range_query::active() && crate::range_query::is_other_work(f.name) {
            // SAFETY: the call's CUpti_CallbackData (caller's guarantee).
            unsafe { range_query_other(data, false) };
        }
        // SAFETY: functionReturnValue points to the call's cudaError_t / CUresult at exit.
        let result = if ret.is_null() { 0 } else { unsafe { ret.read_unaligned() } };
        let rule = inj.allocation_rules[di].get(cbid as usize).copied().unwrap_or_default();
        let allocation = result == 0 && rule.op == 1 && owns_memory_calls(domain);
        if domain == ApiDomain::Runtime {
            let _ = RUNTIME_DEPTH.try_with(|d| d.set(d.get().saturating_sub(1)));
        }
        if let Some(&rule) = inj.capture_rules[di].get(cbid as usize).filter(|&&r| r != 0)
            // The runtime's begin makes the driver's: one of them counts.
            && (domain == ApiDomain::Runtime || RUNTIME_DEPTH.try_with(Cell::get).unwrap_or(0) == 0)
        {
            note_capture(rule, result);
            if rule == CAPTURE_END && crate::range_query::active() {
                // SAFETY: the call's CUpti_CallbackData (caller's guarantee).
                unsafe { range_query_other(data, false) };
            }
        }
        let launch = inj.launch_rules[di].get(cbid as usize).copied().unwrap_or_default();
        // With the dispatch taken from the runtime, a driver launch (its callback delivered only
        // when every driver call is traced) adds one only outside a runtime call.
        let launched = result == 0
            && launch.active
            && inj.launch_mode != LaunchMode::CallbacksOnly
            && (domain == ApiDomain::Runtime
                || !inj.launch_mode.runtime_dispatch()
                || RUNTIME_DEPTH.try_with(Cell::get).unwrap_or(0) == 0)
            && (emit::dispatch_wanted() || inj.dump.is_some() || crate::range_query::active());
        let call = OPEN
            .try_with(|o| {
                let mut o = o.borrow_mut();
                // The innermost open call is this one unless an enter was not delivered.
                match o.last() {
                    Some(c) if c.matches(domain, cbid) => o.pop(),
                    _ => None,
                }
            })
            .ok()
            .flatten();
        if domain == ApiDomain::Driver && launch.active && !launched && inj.launch_mode.runtime_dispatch() {
            // SAFETY: params is f's parameter struct, valid during the callback.
            let func = unsafe { arg(f, params, launch.func) } as usize as *mut c_void;
            learn_stub(inj, func);
        }
        if call.is_none() && !allocation && !launched {
            return;
        }
        // The arguments at the exit, read once for the allocation, the launch and the exit's
        // record.
        // SAFETY: params is f's parameter struct, valid during the callback.
        let mut p = unsafe { emit::call_payload(f, params) };
        if allocation {
            // SAFETY: the out-pointer argument was written (success); data is the call's
            // CUpti_CallbackData.
            unsafe { record_allocation(inj, f, &p, rule, data) };
        }
        // One clock reading for the launch record and the call's end (0: the exit reads it).
        let now = if launched { offtrace_core::timestamp_ns() } else { 0 };
        if launched {
            // SAFETY: a successful launch's arguments; data is its CUpti_CallbackData.
            unsafe { record_launch(inj, f, &p, launch, cupti_corr, data, now) };
        }
        if let Some(call) = call {
            emit::api_exit_at(call, &mut p, result, now);
        }
    }
}

/// A kernel launch is about to be made: the range profiler starts in its context if this is the
/// context's first (`record --query-metrics cupti.range_profiler`). CUPTI's and the driver's
/// calls it makes are the backend's own: not traced.
///
/// # Safety
/// `data` is the launch's `CUpti_CallbackData`.
#[cold]
#[inline(never)]
unsafe fn range_query_enter(inj: &Injection, data: *const u8) {
    use l::CUpti_CallbackData as cd;
    // SAFETY: field of the launch's CUpti_CallbackData (caller's guarantee).
    let ctx = unsafe { field(data, cd::context) } as usize as *mut c_void;
    let ctx = if ctx.is_null() { offtrace_metrics::cupti::current_context() } else { ctx };
    if ctx.is_null() {
        return; // a runtime launch creating its context: the driver's launch inside it starts
    }
    let mut dev = 0u32;
    if let Some(g) = inj.cupti.get_device_id {
        // SAFETY: ctx is the launch's live context; dev is an out-parameter.
        unsafe { g(ctx, &mut dev) };
    }
    let was_busy = BUSY.try_with(|b| b.replace(true)).unwrap_or(true);
    crate::range_query::launch_enter(ctx, dev);
    let _ = BUSY.try_with(|b| b.set(was_busy));
}

/// The enter or exit of a call that runs other device work than a launched kernel: the range
/// profiler keeps it out of the launches' batches (see `range_query::other_work`).
///
/// # Safety
/// `data` is the call's `CUpti_CallbackData`.
#[cold]
#[inline(never)]
unsafe fn range_query_other(data: *const u8, enter: bool) {
    use l::CUpti_CallbackData as cd;
    // SAFETY: field of the call's CUpti_CallbackData (caller's guarantee).
    let ctx = unsafe { field(data, cd::context) } as usize as *mut c_void;
    let was_busy = BUSY.try_with(|b| b.replace(true)).unwrap_or(true);
    crate::range_query::other_work(ctx, enter);
    let _ = BUSY.try_with(|b| b.set(was_busy));
}

/// Whether allocations, frees and launches are taken from this domain's call on this thread:
/// driver calls inside a runtime call are the runtime's own implementation.
fn owns_memory_calls(domain: ApiDomain) -> bool {
    domain == ApiDomain::Runtime || RUNTIME_DEPTH.try_with(Cell::get).unwrap_or(0) == 0
}

/// Argument `i` of `f` (0 when absent).
///
/// # Safety
/// `params` is null or `f`'s parameter struct.
unsafe fn arg(f: &table::ApiFunction, params: *const u8, i: u8) -> u64 {
    let mut v = [0u64; offtrace_core::MAX_ARGS];
    // SAFETY: per the caller.
    let n = unsafe { table::read_args(f, params, &mut v) };
    if usize::from(i) < n { v[usize::from(i)] } else { 0 }
}

/// # Safety
/// `p` holds `f`'s arguments at a successful exit (its out-pointers were written); `data` is the
/// call's `CUpti_CallbackData`.
unsafe fn record_allocation(
    inj: &Injection,
    f: &table::ApiFunction,
    p: &ApiCallPayload,
    rule: AllocRule,
    data: *const u8,
) {
    let arg = |i: u8| call_arg(p, i);
    // SAFETY: per the caller: the pointer parameter is an out-pointer the call wrote.
    unsafe {
        let out = arg(rule.ptr) as usize as *const u64;
        if out.is_null() {
            return;
        }
        let ptr = out.read_unaligned();
        let size = if rule.size != NONE {
            arg(rule.size)
        } else if rule.pitch != NONE && rule.height != NONE {
            let pitch = arg(rule.pitch) as usize as *const usize;
            if pitch.is_null() { 0 } else { pitch.read_unaligned() as u64 * arg(rule.height) }
        } else {
            0
        };
        let ty = offtrace_core::MemoryType::from_u32(u32::from(rule.memory_type));
        // Device and managed memory belong to the calling context's device (pinned host memory
        // to none): the report's memory by device and a multi-GPU program's live bytes per GPU
        // read it.
        let device = match ty {
            offtrace_core::MemoryType::Device | offtrace_core::MemoryType::Shared => allocation_device(inj, data),
            _ => 0,
        };
        emit::memory_alloc(ptr, size, ty, device);
        inj.dump_line(|| {
            format!(r#"{{"t":"alloc","function":"{}","ptr":{ptr},"size":{size},"type":"{ty:?}"}}"#, f.name)
        });
    }
}

/// The device id ([`emit::device_id`]) of the context a call ran in (0 when CUPTI cannot say).
///
/// # Safety
/// `data` is the call's `CUpti_CallbackData`.
unsafe fn allocation_device(inj: &Injection, data: *const u8) -> u64 {
    use l::CUpti_CallbackData as cd;
    // SAFETY: field of the call's CUpti_CallbackData (caller's guarantee).
    let ctx = unsafe { field(data, cd::context) } as usize as *mut c_void;
    let ctx = if ctx.is_null() { offtrace_metrics::cupti::current_context() } else { ctx };
    let Some(g) = inj.cupti.get_device_id.filter(|_| !ctx.is_null()) else {
        return 0;
    };
    let mut dev = 0u32;
    // SAFETY: ctx is the call's live context (or the thread's current one); dev is an
    // out-parameter.
    if unsafe { g(ctx, &mut dev) } != 0 {
        return 0;
    }
    emit::device_id(dev)
}

/// Argument `i` of a call's payload (0 when absent).
fn call_arg(p: &ApiCallPayload, i: u8) -> u64 {
    let i = usize::from(i);
    if i < p.arg_count as usize { p.args.get(i).copied().unwrap_or(0) } else { 0 }
}

/// What the backend knows of a kernel function: its parameters' (offset, size) and its
/// demangled name. Cached per `CUfunction`/`CUkernel` handle (a handle reused for another kernel
/// after a module unload would keep the old entry: programs rarely unload modules while they
/// launch).
#[derive(Debug, Clone, Copy)]
struct KernelInfo {
    params: &'static [(u32, u32)],
    name: *const c_char,
    /// The `CUfunction` / `CUkernel` handle (a runtime launch's host stub resolved; 0 when the
    /// runtime could not resolve it).
    function: usize,
}

// SAFETY: `name` points to a leaked, immutable string (the demangling cache's), readable from
// any thread.
unsafe impl Send for KernelInfo {}

/// Entries of each thread's kernel cache (direct-mapped by handle).
const THREAD_KERNELS: usize = 64;

thread_local! {
    /// Kernels this thread launched lately: a launch finds its kernel without the shared lock.
    static KERNELS: RefCell<Vec<(usize, KernelInfo)>> = const { RefCell::new(Vec::new()) };
}

/// The kernel of a launch: `func` is a driver handle, or with `stub` a runtime launch's host
/// stub (or `cudaKernel_t`), known once learnt from the driver launch inside one of its
/// launches ([`learn_stub`]; unknown until then).
fn kernel_info(inj: &Injection, func: *mut c_void, stub: bool) -> KernelInfo {
    // Stubs and driver handles in one cache: the top bit (no user-space address has it) keeps
    // a stub's entry apart from a handle's.
    let key = func as usize | (usize::from(stub) << (usize::BITS - 1));
    // Handles are allocations of at least 16 bytes: the bits above 4 spread them.
    let slot = (key >> 4) % THREAD_KERNELS;
    let hit = KERNELS.try_with(|k| k.borrow().get(slot).filter(|e| e.0 == key).map(|e| e.1)).ok().flatten();
    if let Some(v) = hit {
        return v;
    }
    let unknown = KernelInfo { params: &[], name: std::ptr::null(), function: 0 };
    // None: a stub not learnt yet (not cached: a later launch finds it once learnt).
    let Some(info) = kernel_info_shared(inj, key, func, stub) else { return unknown };
    let _ = KERNELS.try_with(|k| {
        let mut k = k.borrow_mut();
        if k.is_empty() {
            k.resize(THREAD_KERNELS, (0, unknown));
        }
        k[slot] = (key, info);
    });
    info
}

#[cold]
#[inline(never)]
fn kernel_info_shared(inj: &Injection, key: usize, func: *mut c_void, stub: bool) -> Option<KernelInfo> {
    if let Some(v) = inj.kernel_params.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Some(*v);
    }
    if stub {
        return None;
    }
    let _ = BUSY.try_with(|b| b.set(true));
    let d = &inj.driver;
    // The runtime launches library kernels (CUkernel) through cuLaunchKernel as well as
    // functions (CUfunction): ask the function API first, then the kernel API.
    let param = |get: Option<ParamInfoFn>| -> Option<Vec<(u32, u32)>> {
        let get = get?;
        let mut v = Vec::new();
        for i in 0..offtrace_core::MAX_KERNEL_ARGS {
            let (mut off, mut size) = (0usize, 0usize);
            // SAFETY: func is a live handle; out-parameters are valid. An index past the last
            // parameter (or a handle of the other type) returns an error.
            if unsafe { get(func, i, &mut off, &mut size) } != 0 {
                break;
            }
            v.push((off as u32, size as u32));
        }
        (!v.is_empty()).then_some(v)
    };
    let params = param(d.func_param_info).or_else(|| param(d.kernel_param_info)).unwrap_or_default();
    let name = |get: Option<NameFn>| -> Option<*const c_char> {
        let get = get?;
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: func is a live handle; name is a valid out-parameter.
        (unsafe { get(&mut name, func) } == 0 && !name.is_null()).then_some(name)
    };
    let raw = name(d.func_name).or_else(|| name(d.kernel_name)).unwrap_or(std::ptr::null());
    let _ = BUSY.try_with(|b| b.set(false));
    // SAFETY: the driver's kernel names live as long as the kernel's module, which outlives
    // its launches (and the cache keeps the demangled copy).
    let info = KernelInfo {
        params: Box::leak(params.into_boxed_slice()),
        name: unsafe { emit::demangled(raw) },
        function: func as usize,
    };
    inj.kernel_params.lock().unwrap_or_else(|e| e.into_inner()).insert(key, info);
    Some(info)
}

/// Learning runtime launches' kernels.
///
/// A runtime launch names its kernel by the host stub (`func`), which only the runtime can turn
/// into the `CUfunction` whose parameter layout the kernel allocation properties need. Asking
/// the runtime from inside its own callback did not work: on the H100 (run T1) launches
/// resolved with `cudaGetFuncBySymbol` there carried no kernel parameters at all (and a failed
/// runtime call sets the last-error state the program reads next). The driver launch the runtime makes inside the launch names the
/// `CUfunction`: while a stub is unknown the driver launch callbacks are on, the runtime launch's
/// enter notes its stub ([`LAUNCH_STUB`]) and the driver launch's exit inside it files the
/// kernel under the stub ([`learn_stub`]). Once no runtime launch has met an unknown stub for
/// [`LEARNING_PERIOD_MS`], the flusher turns the driver launch callbacks off ([`tune_learning`]), and
/// turns them on again after a launch meets one (that launch, and those of unknown stubs until
/// the next period, carry no kernel parameters: their names come from CUPTI's `symbolName`). A training loop launches the same kernels every step:
/// after its first steps each launch is delivered once. Without the flusher
/// (`OFFTRACE_CUDA_FLUSH_MS=0`) the callbacks stay on.
static LEARNING: AtomicBool = AtomicBool::new(false);
/// How often the flusher looks at [`UNKNOWN_STUBS`] (ms).
const LEARNING_PERIOD_MS: u64 = 100;
/// Runtime launches that met an unknown stub (Relaxed: a count the flusher compares between
/// its periods; rare once the program's kernels are known).
static UNKNOWN_STUBS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The stub of this thread's open runtime launch when it is not known yet (0 otherwise).
    static LAUNCH_STUB: Cell<usize> = const { Cell::new(0) };
}

/// At a runtime launch's enter: notes the launch's stub when it is unknown.
///
/// # Safety
/// `params` is the parameter struct of `f`, whose launch rule is `rule`.
unsafe fn note_launch_stub(inj: &Injection, f: &table::ApiFunction, params: *const u8, rule: LaunchRule) {
    let Some(p) = f.params.get(usize::from(rule.func)) else { return };
    if params.is_null() {
        return;
    }
    // SAFETY: the func parameter of f's parameter struct (caller's guarantee), at its offset.
    let stub = unsafe { field(params, (p.offset as usize, p.size as usize)) } as usize;
    let unknown = stub != 0 && kernel_info(inj, stub as *mut c_void, true).function == 0;
    let _ = LAUNCH_STUB.try_with(|s| s.set(if unknown { stub } else { 0 }));
    if unknown {
        UNKNOWN_STUBS.fetch_add(1, Ordering::Relaxed);
    }
}

/// At a driver launch's exit inside a runtime launch whose stub is unknown: the kernel filed
/// under the stub.
fn learn_stub(inj: &Injection, func: *mut c_void) {
    let Ok(stub) = LAUNCH_STUB.try_with(|s| s.replace(0)) else { return };
    if stub == 0 || func.is_null() {
        return;
    }
    let info = kernel_info(inj, func, false);
    let key = stub | (1 << (usize::BITS - 1));
    inj.kernel_params
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, KernelInfo { function: func as usize, ..info });
}

/// The flusher's period: turns the driver launch callbacks off when no runtime launch met an
/// unknown stub since the last period, on when one did ([`LEARNING`]).
fn tune_learning(inj: &Injection, last: &mut u64) {
    // OFFTRACE_CUDA_DRIVER_API=1 keeps every driver callback on.
    if !inj.launch_mode.runtime_dispatch() || inj.driver_all || inj.ownership != Ownership::Offtrace {
        return;
    }
    let plan = inj.plan.lock().unwrap_or_else(|e| e.into_inner()).1;
    if !plan.driver || plan.empty {
        return;
    }
    let n = UNKNOWN_STUBS.load(Ordering::Relaxed);
    let met_unknown = n != *last;
    *last = n;
    // Relaxed: only this thread and the start switch it; the callbacks read it nowhere.
    if let Some(on) = learning_switch(LEARNING.load(Ordering::Relaxed), met_unknown, n != 0) {
        LEARNING.store(on, Ordering::Relaxed);
        enable_driver_launch_callbacks(&inj.cupti, inj.subscriber as SubscriberHandle, on);
        inj.dump_line(|| format!(r#"{{"t":"learning","on":{on},"unknown_stubs":{n}}}"#));
    }
}

/// Whether the driver launch callbacks switch (`Some(on)`) given whether they are on for
/// learning, whether a runtime launch met an unknown stub in the last period, and whether any
/// has yet: a program's start, before its first launch, is not a quiet period (run T: the
/// callbacks went off before the CUDA C workload's first launch, and none of its launches
/// carried kernel parameters).
fn learning_switch(learning: bool, met_unknown: bool, launched: bool) -> Option<bool> {
    (launched && learning != met_unknown).then_some(met_unknown)
}

fn enable_driver_launch_callbacks(c: &Cupti, sub: SubscriberHandle, on: bool) {
    let rules = launch_rules(ApiDomain::Driver);
    for (cbid, r) in rules.iter().enumerate() {
        if r.active {
            // SAFETY: sub is the live subscriber; cbid is a driver callback id.
            unsafe { (c.enable_callback)(u32::from(on), sub, l::CUPTI_CB_DOMAIN_DRIVER_API as u32, cbid as u32) };
        }
    }
}

/// The key of a launch's stream in the per-thread stream cache: the handle of a created
/// stream, or [`LEGACY_STREAM`] / [`PER_THREAD_STREAM`] for the default streams (NULL is the
/// legacy default stream, or the thread's own in a `_ptsz` entry point; CUDA's special handles
/// `CU_STREAM_LEGACY` = 1 and `CU_STREAM_PER_THREAD` = 2 name them whatever the entry point).
fn stream_key(handle: u64, per_thread_entry: bool) -> u64 {
    match handle {
        0 if per_thread_entry => PER_THREAD_STREAM,
        0 | LEGACY_STREAM => LEGACY_STREAM,
        h => h,
    }
}

const LEGACY_STREAM: u64 = 1;
const PER_THREAD_STREAM: u64 = 2;

/// Bumped when a stream is destroyed: its handle may come back as another stream, so every
/// thread's cached stream ids are stale (Relaxed: a launch racing the destruction of its own
/// stream is a program error; the counter only needs to change eventually).
static STREAM_GENERATION: AtomicU32 = AtomicU32::new(0);

/// Entries of each thread's stream cache (direct-mapped by handle).
const THREAD_STREAMS: usize = 16;

#[derive(Debug, Clone, Copy, Default)]
struct StreamSlot {
    context: usize,
    key: u64,
    generation: u32,
    queue: u64,
}

thread_local! {
    /// Streams this thread launched on lately: (context, stream) → queue id without asking CUPTI.
    static STREAMS: RefCell<[StreamSlot; THREAD_STREAMS]> =
        const { RefCell::new([StreamSlot { context: 0, key: 0, generation: 0, queue: 0 }; THREAD_STREAMS]) };
}

/// The queue id of the stream a launch went to (0 when CUPTI cannot tell): the id CUPTI's
/// activity records carry for the same stream, so the launch and its completion agree.
fn launch_queue(inj: &Injection, ctx: *mut c_void, ctx_id: u32, key: u64) -> u64 {
    let generation = STREAM_GENERATION.load(Ordering::Relaxed);
    let slot = ((key >> 4) ^ (ctx as u64 >> 4)) as usize % THREAD_STREAMS;
    let hit = STREAMS
        .try_with(|s| {
            let e = s.borrow()[slot];
            (e.context == ctx as usize && e.key == key && e.generation == generation && e.queue != 0).then_some(e.queue)
        })
        .ok()
        .flatten();
    if let Some(q) = hit {
        return q;
    }
    let queue = launch_queue_slow(inj, ctx, ctx_id, key);
    let _ = STREAMS.try_with(|s| s.borrow_mut()[slot] = StreamSlot { context: ctx as usize, key, generation, queue });
    queue
}

#[cold]
#[inline(never)]
fn launch_queue_slow(inj: &Injection, ctx: *mut c_void, ctx_id: u32, key: u64) -> u64 {
    let Some(get_stream_id) = inj.cupti.get_stream_id_ex else { return 0 };
    if ctx.is_null() {
        return 0;
    }
    let (stream, per_thread) = match key {
        LEGACY_STREAM => (std::ptr::null_mut(), 0),
        PER_THREAD_STREAM => (std::ptr::null_mut(), 1),
        h => (h as usize as *mut c_void, 0),
    };
    let mut sid = 0u32;
    let _ = BUSY.try_with(|b| b.set(true));
    // SAFETY: ctx is the context current to the launching call; stream is the launch's stream
    // handle (NULL for a default stream); sid is an out-parameter.
    let ok = unsafe { get_stream_id(ctx, stream, per_thread, &mut sid) } == 0;
    let _ = BUSY.try_with(|b| b.set(false));
    if !ok {
        return 0;
    }
    define_queue(inj, ctx, ctx_id, sid);
    emit::queue_id(ctx_id, sid)
}

/// Writes the queue definition of stream `sid` of a context once (a default stream has no
/// stream-created callback; created streams have one, and a launch may come first).
fn define_queue(inj: &Injection, ctx: *mut c_void, ctx_id: u32, sid: u32) {
    let queue = emit::queue_id(ctx_id, sid);
    if !inj.defined_queues.lock().unwrap_or_else(|e| e.into_inner()).insert(queue) {
        return;
    }
    let mut dev = 0u32;
    if let Some(g) = inj.cupti.get_device_id {
        // SAFETY: ctx is a live context; dev is an out-parameter.
        unsafe { g(ctx, &mut dev) };
    }
    emit::stream(ctx_id, sid, dev, true);
}

/// # Safety
/// `p` holds `f`'s arguments at a successful exit of a launch (its `kernelParams` and launch
/// configuration are readable); `data` is its `CUpti_CallbackData`.
unsafe fn record_launch(
    inj: &Injection,
    f: &table::ApiFunction,
    p: &ApiCallPayload,
    rule: LaunchRule,
    cupti_corr: u32,
    data: *const u8,
    ts: u64,
) {
    let at = |i: u8| call_arg(p, i);
    let (func, kernel_params) = (at(rule.func) as usize as *mut c_void, at(rule.params) as usize as *const *const u8);
    if func.is_null() {
        return;
    }
    // Geometry: cuLaunchKernel passes it as arguments, cuLaunchKernelEx in its CUlaunchConfig.
    let mut geometry = [0u64; 6];
    let mut stream = at(rule.stream);
    if rule.config != NONE && rule.runtime {
        let config = at(rule.config) as usize as *const u8;
        if !config.is_null() {
            use l::cudaLaunchConfig_t as lc;
            // SAFETY: as below.
            stream = unsafe { field(config, lc::stream) };
            let fields = [lc::gridDim_x, lc::gridDim_y, lc::gridDim_z, lc::blockDim_x, lc::blockDim_y, lc::blockDim_z];
            for (g, fld) in geometry.iter_mut().zip(fields) {
                // SAFETY: config is the launch's cudaLaunchConfig_t (read at the generated
                // offsets).
                *g = unsafe { field(config, fld) };
            }
        }
    } else if rule.config != NONE {
        let config = at(rule.config) as usize as *const u8;
        if !config.is_null() {
            use l::CUlaunchConfig as lc;
            // SAFETY: as below.
            stream = unsafe { field(config, lc::hStream) };
            let fields = [lc::gridDimX, lc::gridDimY, lc::gridDimZ, lc::blockDimX, lc::blockDimY, lc::blockDimZ];
            for (g, fld) in geometry.iter_mut().zip(fields) {
                // SAFETY: config is the launch's CUlaunchConfig (read at the generated offsets).
                *g = unsafe { field(config, fld) };
            }
        }
    } else {
        for (g, &i) in geometry.iter_mut().zip(&rule.geometry) {
            *g = at(i);
        }
    }
    let mut info = kernel_info(inj, func, rule.runtime);
    if rule.runtime {
        if info.name.is_null() {
            use l::CUpti_CallbackData as cd;
            // SAFETY: symbolName of the runtime launch's CUpti_CallbackData: null or the
            // kernel's NUL-terminated name, which lives as long as its module.
            info.name = unsafe { emit::demangled(field(data, cd::symbolName) as usize as *const c_char) };
        }
    } else {
        info.function = func as usize;
    }
    let mut values = [0u64; offtrace_core::MAX_KERNEL_ARGS];
    let mut n = 0;
    if !kernel_params.is_null() && inj.launch_mode != LaunchMode::NoArgs {
        for (i, &(_, size)) in info.params.iter().enumerate() {
            // SAFETY: kernelParams holds one pointer per kernel parameter (CUDA's contract for
            // a successful launch), each to a value of the parameter's size.
            let v = unsafe {
                let p = kernel_params.add(i).read();
                if p.is_null() || size != 8 { 0 } else { p.cast::<u64>().read_unaligned() }
            };
            values[i] = v;
            n = i + 1;
        }
    }
    let grid = [geometry[0], geometry[1], geometry[2]];
    let block = [geometry[3], geometry[4], geometry[5]];
    use l::CUpti_CallbackData as cd;
    // SAFETY: fields of the launch's CUpti_CallbackData (caller's guarantee).
    let (ctx, ctx_id) =
        unsafe { (field(data, cd::context) as usize as *mut c_void, field(data, cd::contextUid) as u32) };
    let queue = launch_queue(inj, ctx, ctx_id, stream_key(stream, rule.per_thread));
    if launch_captured(inj, stream, rule.per_thread) {
        // Not a command: a node of the graph being captured. Its kernels are the graph
        // launches' work (CUPTI's records, with the graph launch's correlation); the call's own
        // record stays.
        inj.stats.captured_launches.fetch_add(1, Ordering::Relaxed);
    } else {
        emit::kernel_dispatch(queue, info.function as u64, info.name, grid, block, &values[..n], ts);
    }
    if crate::range_query::active() && !capture_in_progress() {
        // The range profiler's ranges follow launch order: this kernel's correlation and name
        // (a full batch is decoded here, with the launch's context current). Not during a
        // capture (see api_callback).
        // SAFETY: the cached kernel name is NUL-terminated and lives for the process.
        let name = (!info.name.is_null()).then(|| unsafe { CStr::from_ptr(info.name) });
        let was_busy = BUSY.try_with(|b| b.replace(true)).unwrap_or(true);
        crate::range_query::launched(ctx, inj.correlations.get(cupti_corr).unwrap_or(0), name);
        let _ = BUSY.try_with(|b| b.set(was_busy));
    }
    inj.dump_line(|| {
        let mut allocations = String::new();
        for (i, v) in values[..n].iter().enumerate() {
            if let Some((base, size, ty)) = offtrace_core::lookup_allocation(*v) {
                if !allocations.is_empty() {
                    allocations.push(',');
                }
                allocations.push_str(&format!(r#"{{"arg":{i},"base":{base},"size":{size},"type":"{ty:?}"}}"#));
            }
        }
        format!(
            r#"{{"t":"launch","function":"{}","kernel":{},"cupti_corr":{cupti_corr},"grid":{grid:?},"block":{block:?},"params":{n},"allocations":[{allocations}]}}"#,
            f.name,
            dump::json_str(&name_of(info.name)),
        )
    });
}

/// # Safety
/// `data` is CUPTI's `CUpti_ResourceData` for `cbid`.
unsafe fn resource_callback(inj: &Injection, cbid: u32, data: *const u8) {
    use l::CUpti_ResourceData as rd;
    let c = i64::from(cbid);
    // SAFETY: field of CUpti_ResourceData.
    let descriptor = unsafe { field(data, rd::resourceDescriptor) } as usize as *const u8;
    if c == l::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING && crate::range_query::active() {
        // SAFETY: field of CUpti_ResourceData.
        let ctx = unsafe { field(data, rd::context) } as usize as *mut c_void;
        let was_busy = BUSY.try_with(|b| b.replace(true)).unwrap_or(true);
        crate::range_query::context_destroying(ctx);
        let _ = BUSY.try_with(|b| b.set(was_busy));
        return;
    }
    if c == l::CUPTI_CBID_RESOURCE_CONTEXT_CREATED
        || c == l::CUPTI_CBID_RESOURCE_STREAM_CREATED
        || c == l::CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING
    {
        // SAFETY: fields of CUpti_ResourceData.
        let (ctx, stream) = unsafe {
            (
                field(data, rd::context) as usize as *mut c_void,
                field(data, rd::resourceHandle_stream) as usize as *mut c_void,
            )
        };
        let (mut ctx_id, mut dev) = (0u32, 0u32);
        // SAFETY: ctx is the live context of the callback; out-parameters are valid.
        unsafe {
            if let Some(g) = inj.cupti.get_context_id {
                g(ctx, &mut ctx_id);
            }
            if let Some(g) = inj.cupti.get_device_id {
                g(ctx, &mut dev);
            }
        }
        if c == l::CUPTI_CBID_RESOURCE_CONTEXT_CREATED {
            let mut name = [0 as c_char; 256];
            if let Some(get) = inj.driver.device_name {
                let _ = BUSY.try_with(|b| b.set(true));
                // SAFETY: a 256-byte buffer; dev is the context's device ordinal.
                unsafe { get(name.as_mut_ptr(), name.len() as i32 - 1, dev as i32) };
                let _ = BUSY.try_with(|b| b.set(false));
            }
            // SAFETY: zero-initialised and at most len-1 bytes written: NUL-terminated.
            let name = unsafe { CStr::from_ptr(name.as_ptr()) };
            emit::device(dev, name);
            crate::metrics::context_created(say);
            // The legacy default stream has no stream-created callback: its queue is defined
            // with its context (copies and fills on it have no launch to define it).
            let _ = launch_queue(inj, ctx, ctx_id, LEGACY_STREAM);
            inj.dump_line(|| {
                format!(
                    r#"{{"t":"device","device":{dev},"context":{ctx_id},"name":{}}}"#,
                    dump::json_str(&name.to_string_lossy())
                )
            });
        } else {
            let mut sid = 0u32;
            if let Some(g) = inj.cupti.get_stream_id_ex {
                // SAFETY: live context and stream of the callback; sid is an out-parameter.
                unsafe { g(ctx, stream, 0, &mut sid) };
            }
            let created = c == l::CUPTI_CBID_RESOURCE_STREAM_CREATED;
            let queue = emit::queue_id(ctx_id, sid);
            let mut defined = inj.defined_queues.lock().unwrap_or_else(|e| e.into_inner());
            // A launch on a new stream may have defined it already (its callback can come first).
            if !created || defined.insert(queue) {
                emit::stream(ctx_id, sid, dev, created);
            }
            if !created {
                defined.remove(&queue);
                STREAM_GENERATION.fetch_add(1, Ordering::Relaxed);
            }
        }
        return;
    }
    if c == l::CUPTI_CBID_RESOURCE_MODULE_LOADED || c == l::CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING {
        if descriptor.is_null() {
            return;
        }
        use l::CUpti_ModuleResourceData as m;
        // SAFETY: the descriptor of a module callback is CUpti_ModuleResourceData.
        let (id, size, image) = unsafe {
            (field(descriptor, m::moduleId) as u32, field(descriptor, m::cubinSize), field(descriptor, m::pCubin))
        };
        let loaded = c == l::CUPTI_CBID_RESOURCE_MODULE_LOADED;
        // The cubin is CUPTI's for the callback's duration: read here, not kept.
        let image: &[u8] = if image == 0 || size == 0 || size > (1 << 32) {
            &[]
        } else {
            // SAFETY: CUPTI's module descriptor: pCubin points at cubinSize bytes during the callback.
            unsafe { std::slice::from_raw_parts(image as *const u8, size as usize) }
        };
        let kernels = crate::cubin::kernel_names(image);
        let name = emit::module_name(&kernels);
        emit::module(id, size, &name, loaded);
        inj.dump_line(|| {
            let names: Vec<String> =
                kernels.iter().map(|k| crate::dump::json_str(&String::from_utf8_lossy(k))).collect();
            format!(
                r#"{{"t":"module_{}","id":{id},"cubin_size":{size},"kernels":[{}]}}"#,
                if loaded { "load" } else { "unload" },
                names.join(",")
            )
        });
    } else if c == l::CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED
        || c == l::CUPTI_CBID_RESOURCE_GRAPHNODE_DEPENDENCY_CREATED
        || c == l::CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED
        || c == l::CUPTI_CBID_RESOURCE_GRAPH_CREATED
        || c == l::CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED
    {
        if descriptor.is_null() {
            return;
        }
        use l::CUpti_GraphData as g;
        // SAFETY: the descriptor of a graph callback is CUpti_GraphData.
        let (graph, node, dependency, node_type) = unsafe {
            (
                field(descriptor, g::graph) as usize as *mut c_void,
                field(descriptor, g::node) as usize as *mut c_void,
                field(descriptor, g::dependency) as usize as *mut c_void,
                field(descriptor, g::nodeType) as u32,
            )
        };
        let node_id = |n: *mut c_void| -> u64 {
            let mut id = 0u64;
            if let (Some(get), false) = (inj.cupti.get_graph_node_id, n.is_null()) {
                // SAFETY: n is a live graph node (CUPTI's callback argument); id is an out-param.
                unsafe { get(n, &mut id) };
            }
            id
        };
        let graph_id = {
            let mut id = 0u32;
            if let (Some(get), false) = (inj.cupti.get_graph_id, graph.is_null()) {
                // SAFETY: graph is a live graph; id is an out-param.
                unsafe { get(graph, &mut id) };
            }
            id
        };
        if c == l::CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED || c == l::CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED {
            let n = node_id(node);
            let node_type = graph_node_type(inj.driver.graph_node_type, node, node_type);
            if inj.graph_nodes.lock().unwrap_or_else(|e| e.into_inner()).first_sight(n) {
                emit::graph_node(graph_id, n, node_type);
            }
            inj.dump_line(|| format!(r#"{{"t":"graph_node","graph":{graph_id},"node":{n},"node_type":{node_type}}}"#));
        } else if c == l::CUPTI_CBID_RESOURCE_GRAPHNODE_DEPENDENCY_CREATED {
            let (from, to) = (node_id(dependency), node_id(node));
            let new = inj.graph_nodes.lock().unwrap_or_else(|e| e.into_inner()).edge(from, to);
            for (n, handle) in new.into_iter().zip([dependency, node]) {
                if let Some(n) = n {
                    let t = graph_node_type(inj.driver.graph_node_type, handle, GRAPH_NODE_TYPE_UNKNOWN);
                    emit::graph_node(graph_id, n, t);
                }
            }
            emit::graph_edge(graph_id, from, to);
            inj.dump_line(|| format!(r#"{{"t":"graph_edge","graph":{graph_id},"from":{from},"to":{to}}}"#));
        } else if c == l::CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED {
            inj.dump_line(|| format!(r#"{{"t":"graph_exec","graph":{graph_id}}}"#));
        }
    }
}

/// The `CUgraphNodeType` of graph node `node`: the driver's (`cuGraphNodeGetType`), else
/// `fallback` (CUPTI's `nodeType` field, which read 0, kernel, for every node of the CUDA C
/// workload's graph on the H100 with CUDA 13, memset and memcpy nodes included: run F).
/// The driver call is the backend's own: not recorded.
fn graph_node_type(get: Option<GraphNodeTypeFn>, node: *mut c_void, fallback: u32) -> u32 {
    let Some(get) = get.filter(|_| !node.is_null()) else { return fallback };
    let mut t = u32::MAX;
    let was_busy = BUSY.try_with(|b| b.replace(true)).unwrap_or(true);
    // SAFETY: node is a live graph node (CUPTI's callback argument, during the callback); t is
    // an out-param of the enum's size (CUgraphNodeType is a C enum: 4 bytes).
    let rc = unsafe { get(node, &mut t) };
    let _ = BUSY.try_with(|b| b.set(was_busy));
    if rc == 0 && t != u32::MAX { t } else { fallback }
}

/// The graph nodes the trace has a creation record of (CUPTI's node ids). CUPTI reports a node
/// twice when a graph is instantiated (created and cloned, both with the clone's id), reports
/// the dependency of a node added with dependencies before the node itself, and reports edges
/// between nodes of internal copies it never reports as created: a node is created in the
/// trace when first seen, as a node or as an end of an edge, so every edge joins two nodes.
#[derive(Debug, Default)]
pub(crate) struct GraphNodes {
    seen: HashSet<u64>,
    order: std::collections::VecDeque<u64>,
}

/// Node ids remembered (a program that builds graphs forever must not grow the set).
const GRAPH_NODES_MAX: usize = 1 << 16;

/// The node type of a node first seen as an edge's end (not a `CUgraphNodeType`).
const GRAPH_NODE_TYPE_UNKNOWN: u32 = u32::MAX;

impl GraphNodes {
    /// Whether `node` is new (and now known). Node 0 (no node) is never new.
    pub(crate) fn first_sight(&mut self, node: u64) -> bool {
        if node == 0 || !self.seen.insert(node) {
            return false;
        }
        self.order.push_back(node);
        if self.order.len() > GRAPH_NODES_MAX
            && let Some(old) = self.order.pop_front()
        {
            self.seen.remove(&old);
        }
        true
    }

    /// The ends of an edge `from` → `to` the trace has no node of yet (to be created first).
    pub(crate) fn edge(&mut self, from: u64, to: u64) -> [Option<u64>; 2] {
        [from, to].map(|n| self.first_sight(n).then_some(n))
    }
}

/// Activity buffers CUPTI handed back, kept for its next request.
///
/// CUPTI asks for a buffer on the thread that fills the last one (an application thread, in
/// the middle of a launch) and, unless told that buffers come zeroed
/// (`CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER`), clears all 8 MiB there: 2,048 page faults
/// and a memset, seen on the H100 as 2–4 ms of `ACTIVITY_BUFFER_REQUEST` overhead per buffer,
/// 20–50 ms per run of `train.py`. So buffers are zeroed here: fresh ones come from `mmap`
/// (zero pages), and a processed buffer has its written prefix cleared on CUPTI's buffer
/// thread before it is kept for the next request. A few are kept (CUPTI holds one per
/// thread that records, plus those being delivered).
static SPARE_BUFFERS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
const MAX_SPARE_BUFFERS: usize = 8;

/// Tells CUPTI that the buffers it is given are zeroed (before the buffer callbacks are
/// registered, as CUPTI asks).
fn declare_zeroed_buffers(c: &Cupti) {
    let mut on: u8 = 1;
    let mut len = std::mem::size_of::<u8>();
    // SAFETY: a uint8_t value and its size, as the attribute takes.
    let r = unsafe {
        (c.activity_set_attribute)(
            l::CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER as u32,
            &mut len,
            (&mut on as *mut u8).cast(),
        )
    };
    if r != 0 {
        say(&format!("cuptiActivitySetAttribute(ZEROED_OUT_ACTIVITY_BUFFER) failed: {}", c.result_string(r)));
    }
}

unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    if buffer.is_null() || size.is_null() {
        return;
    }
    let spare = SPARE_BUFFERS.lock().map(|mut v| v.pop()).unwrap_or(None);
    let p = match spare {
        Some(p) => p as *mut u8,
        // SAFETY: an anonymous private mapping: no preconditions; zero-filled, page-aligned
        // (CUPTI wants 8-byte alignment).
        None => unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                BUFFER_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED { std::ptr::null_mut() } else { p.cast::<u8>() }
        },
    };
    const _: () = assert!(4096 % BUFFER_ALIGN == 0);
    // SAFETY: out-pointers checked above.
    unsafe {
        *buffer = p;
        *size = if p.is_null() { 0 } else { BUFFER_SIZE };
        if !max_records.is_null() {
            *max_records = 0;
        }
    }
}

/// Clears the `valid` bytes CUPTI wrote and keeps the buffer for the next request, or unmaps
/// it when there are enough spares.
fn release_buffer(buffer: *mut u8, valid: usize) {
    if let Ok(mut v) = SPARE_BUFFERS.lock()
        && v.len() < MAX_SPARE_BUFFERS
    {
        // SAFETY: the buffer is BUFFER_SIZE bytes (ours), CUPTI is done with it.
        unsafe { std::ptr::write_bytes(buffer, 0, valid.min(BUFFER_SIZE)) };
        v.push(buffer as usize);
        return;
    }
    // SAFETY: the buffer is a BUFFER_SIZE mapping from buffer_requested, no longer used.
    unsafe { libc::munmap(buffer.cast(), BUFFER_SIZE) };
}

unsafe extern "C" fn buffer_completed(ctx: *mut c_void, stream_id: u32, buffer: *mut u8, _size: usize, valid: usize) {
    if buffer.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if let Some(inj) = INJECTION.get() {
            // SAFETY: CUPTI hands back a buffer it filled with `valid` bytes of records.
            unsafe { inj.process_buffer(ctx, stream_id, buffer, valid) };
        }
    }));
    release_buffer(buffer, valid);
}

impl Injection {
    /// # Safety
    /// `buffer` holds `valid` bytes of CUPTI activity records.
    unsafe fn process_buffer(&self, ctx: *mut c_void, stream_id: u32, buffer: *mut u8, valid: usize) {
        let t0 = offtrace_core::timestamp_ns();
        self.stats.buffers.fetch_add(1, Ordering::Relaxed);
        let mut rec: *mut u8 = std::ptr::null_mut();
        let mut n = 0u64;
        loop {
            // SAFETY: CUPTI iterates its own buffer; rec is the cursor it returned last.
            let r = unsafe { (self.cupti.activity_get_next_record)(buffer, valid, &mut rec) };
            if r != 0 || rec.is_null() {
                break;
            }
            n += 1;
            // SAFETY: rec is a complete record of CUPTI 13.
            let a = unsafe { activity::decode(rec, self.clock_offset_ns) };
            self.handle(&a);
        }
        self.stats.records.fetch_add(n, Ordering::Relaxed);
        let mut dropped = 0usize;
        // SAFETY: out-parameter valid; ctx/stream as CUPTI passed them.
        if unsafe { (self.cupti.activity_get_num_dropped_records)(ctx, stream_id, &mut dropped) } == 0 && dropped > 0 {
            self.stats.dropped.fetch_add(dropped as u64, Ordering::Relaxed);
        }
        self.stats.processing_ns.fetch_add(offtrace_core::timestamp_ns().saturating_sub(t0), Ordering::Relaxed);
        if let Some(d) = &self.dump {
            d.flush();
        }
    }

    fn handle(&self, a: &Activity) {
        if let Activity::Api(api) = a {
            if api.driver {
                self.driver_launch(api);
            }
            return;
        }
        let cupti_corr = match a {
            Activity::Kernel(k) => k.correlation,
            Activity::Copy(c) => c.correlation,
            Activity::Set(s) => s.correlation,
            Activity::Sync(s) => s.correlation,
            Activity::Memory(m) => m.correlation,
            Activity::Graph(g) => g.correlation,
            Activity::ExternalCorrelation { correlation, .. } => *correlation,
            _ => 0,
        };
        let mut corr = self.correlations.get(cupti_corr).unwrap_or(0);
        if cupti_corr != 0 && corr == 0 && matches!(a, Activity::Kernel(_) | Activity::Copy(_) | Activity::Set(_)) {
            self.stats.unpaired_device_records.fetch_add(1, Ordering::Relaxed);
            if self.driver_launch_records {
                // Perhaps a driver-only launch, whose API record may come after its kernel's.
                corr = driver_only_correlation(cupti_corr);
            }
        }
        if let Activity::Overhead(o) = a {
            let ns = o.end.saturating_sub(o.start);
            self.stats.cupti_overhead_ns.fetch_add(ns, Ordering::Relaxed);
            let k = (o.kind >> 16) as usize;
            if let Some(c) = self.stats.cupti_overhead_by_kind.get(k) {
                c.fetch_add(ns, Ordering::Relaxed);
            }
        }
        if cupti_corr != 0 && !matches!(a, Activity::ExternalCorrelation { .. }) {
            with_external_ids(cupti_corr, || emit::activity(a, corr));
        } else {
            emit::activity(a, corr);
        }
        if let Some(d) = &self.dump
            && let Some(line) = dump::record_line(a, corr)
        {
            d.line(&line);
        }
    }
}

impl Injection {
    /// A driver launch's API activity record ([`LaunchMode`]): inside a runtime call the backend
    /// traced (its correlation id is known) it is that call's implementation and is dropped;
    /// otherwise it is the launching call of its kernels, written into the trace as a
    /// `CUDA_DRIVER_API` call at CUPTI's times (no arguments, no result) with a correlation id
    /// of its own, which its kernels then carry. Tools receive no callback for it (it is known
    /// only after the call). CUPTI's buffer thread.
    fn driver_launch(&self, api: &activity::ApiActivity) {
        if api.correlation == 0 || self.correlations.get(api.correlation).is_some() {
            return;
        }
        self.stats.driver_only_launches.fetch_add(1, Ordering::Relaxed);
        let corr = driver_only_correlation(api.correlation);
        let tid = thread_of(api.thread);
        if let Some(defs) = offtrace_recorder::definitions() {
            let kind = emit::api_kind(ApiDomain::Driver) as u32;
            if self.driver_launch_ops.lock().unwrap_or_else(|e| e.into_inner()).insert(api.cbid) {
                for r in emit::operation_definitions(ApiDomain::Driver, api.cbid, |b| defs.string(b)) {
                    defs.push(r);
                }
            }
            defs.push(offtrace_format::Record::ApiCall(offtrace_format::ApiCall {
                kind,
                op: api.cbid,
                tid,
                start: api.start,
                end: api.end.max(api.start),
                correlation: corr,
                external: 0,
                args: offtrace_format::ApiArgs::default(),
                result: None,
            }));
        }
        self.dump_line(|| {
            let name = ApiDomain::Driver.function(api.cbid).map_or("", |f| f.name);
            format!(
                r#"{{"t":"driver_launch","function":"{name}","cupti_corr":{},"tid":{tid},"start":{},"end":{}}}"#,
                api.correlation, api.start, api.end
            )
        });
    }
}

/// The correlation id of a driver-only launch: derived from CUPTI's, so its kernels carry it
/// whether they reach the buffer thread before the launch's API record or after it (CUPTI
/// writes the API record at the call's exit and a kernel's at completion, in separate buffers:
/// on the H100 every cuBLAS kernel of `train.py` came first). The services' own ids count up
/// from 1 and never reach bit 62.
fn driver_only_correlation(cupti: u32) -> u64 {
    (1 << 62) | u64::from(cupti)
}

/// CUPTI's API activity records name a thread by its `pthread_t` (cut to 32 bits), not by the
/// OS thread id the trace uses: each thread that makes a traced runtime call notes its pair
/// once ([`note_thread`]), and a record of a thread never seen goes on the process's main
/// thread (tid = pid), as NVTX markers do.
static THREAD_IDS: Mutex<Vec<(u32, u32)>> = Mutex::new(Vec::new());

thread_local! {
    static THREAD_NOTED: Cell<bool> = const { Cell::new(false) };
}

#[inline]
fn note_thread() {
    if !THREAD_NOTED.try_with(Cell::get).unwrap_or(true) {
        note_thread_slow();
    }
}

#[cold]
#[inline(never)]
fn note_thread_slow() {
    let _ = THREAD_NOTED.try_with(|n| n.set(true));
    // SAFETY: pthread_self and gettid have no preconditions.
    let (pthread, tid) = unsafe { (libc::pthread_self() as u32, libc::gettid() as u32) };
    let mut t = THREAD_IDS.lock().unwrap_or_else(|e| e.into_inner());
    if !t.iter().any(|e| e.0 == pthread) {
        t.push((pthread, tid));
    }
}

fn thread_of(cupti_thread: u32) -> u32 {
    let t = THREAD_IDS.lock().unwrap_or_else(|e| e.into_inner());
    // A CUPTI that names OS threads: the id is one of the noted tids.
    t.iter().find(|e| e.0 == cupti_thread || e.1 == cupti_thread).map_or(std::process::id(), |e| e.1)
}

/// The services' external correlation ids on device records.
///
/// A tool pushes an id for its context on a thread (`offtrace_push_external_correlation_id`);
/// the API call records of that thread carry it. Device records are emitted later on CUPTI's
/// buffer thread, whose own stacks are empty, so the backend carries the ids over itself: the
/// services tell it each push and pop ([`mirror_external`], the core's external correlation hook)
/// and it keeps a copy of the thread's stacks; an API call made while the copy is not empty
/// stores its ids under its CUPTI correlation id ([`external::remember_call`]), and the buffer
/// thread emits each device record of that call with those ids pushed on its own stacks
/// ([`with_external_ids`]). Threads that never pushed pay one thread-local test per call.
///
/// CUPTI's own external correlation (`cuptiActivityPushExternalCorrelationId`) is not used:
/// CUPTI writes its `EXTERNAL_CORRELATION` records only in front of API *activity* records
/// (`CUPTI_ACTIVITY_KIND_RUNTIME`/`DRIVER`), which this backend does not enable (it takes API
/// calls from callbacks; enabling both would add CUPTI's per-call record to every call). Seen
/// on the H100: ids pushed onto CUPTI's stack produced no `EXTERNAL_CORRELATION` record.
mod external {
    use std::cell::RefCell;
    use std::collections::{HashMap, VecDeque};
    use std::sync::Mutex;

    /// Contexts whose ids a device record carries (the services allow 8 contexts; tools that
    /// push are few).
    pub const MAX_CONTEXTS_CARRIED: usize = 4;
    /// The ids a call carries: (context handle, id), one per context with a non-empty stack.
    pub type CallIds = [(u64, u64); MAX_CONTEXTS_CARRIED];

    thread_local! {
        /// This thread's pushes, oldest first: (context handle, id).
        static STACK: RefCell<Vec<(u64, u64)>> = const { RefCell::new(Vec::new()) };
    }

    pub fn push(ctx: u64, id: u64) {
        let _ = STACK.try_with(|s| s.borrow_mut().push((ctx, id)));
    }

    pub fn pop(ctx: u64) {
        let _ = STACK.try_with(|s| {
            let mut s = s.borrow_mut();
            if let Some(i) = s.iter().rposition(|e| e.0 == ctx) {
                s.remove(i);
            }
        });
    }

    /// The top of each context's stack on this thread (`None` when nothing is pushed).
    #[inline]
    pub fn current() -> Option<CallIds> {
        STACK
            .try_with(|s| {
                let s = s.try_borrow().ok()?;
                if s.is_empty() {
                    return None;
                }
                let mut ids = [(0u64, 0u64); MAX_CONTEXTS_CARRIED];
                let mut n = 0;
                for &(ctx, id) in s.iter().rev() {
                    if n < MAX_CONTEXTS_CARRIED && !ids[..n].iter().any(|e| e.0 == ctx) {
                        ids[n] = (ctx, id);
                        n += 1;
                    }
                }
                Some(ids)
            })
            .ok()
            .flatten()
    }

    /// CUPTI correlation id → the ids of the call. Bounded: the oldest entries go first.
    #[derive(Default)]
    pub struct Calls {
        ids: HashMap<u32, CallIds>,
        order: VecDeque<u32>,
    }

    /// Calls kept; a device record delivered after this many newer calls with ids finds none
    /// (CUPTI delivers within the flush period: far fewer calls).
    const MAX_CALLS: usize = 1 << 16;

    pub static CALLS: Mutex<Option<Calls>> = Mutex::new(None);
    /// Set once a call stored ids: until then the buffer thread looks nothing up.
    pub static ANY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    /// Stores the ids of this thread's stacks for the CUPTI call `correlation`, when any.
    #[inline]
    pub fn remember_call(correlation: u32) {
        if correlation == 0 {
            return;
        }
        if let Some(ids) = current() {
            remember_slow(correlation, ids);
        }
    }

    #[cold]
    #[inline(never)]
    fn remember_slow(correlation: u32, ids: CallIds) {
        let Ok(mut m) = CALLS.lock() else { return };
        let m = m.get_or_insert_with(Calls::default);
        ANY.store(true, std::sync::atomic::Ordering::Relaxed);
        if m.ids.insert(correlation, ids).is_none() {
            m.order.push_back(correlation);
        }
        while m.order.len() > MAX_CALLS {
            if let Some(old) = m.order.pop_front() {
                m.ids.remove(&old);
            }
        }
    }

    pub fn lookup(correlation: u32) -> Option<CallIds> {
        CALLS.lock().ok()?.as_ref()?.ids.get(&correlation).copied()
    }
}

thread_local! {
    /// Set while the buffer thread pushes a device record's external ids on its own stacks:
    /// those pushes are not taken as the buffer thread's own.
    static MIRRORING: Cell<bool> = const { Cell::new(false) };
}

/// The services' [`offtrace_core::ExternalCorrelationHook`]: keeps the thread's copy of its
/// external stacks (see [`external`]).
fn mirror_external(ctx: offtrace_core::ContextId, value: Option<u64>) {
    if MIRRORING.try_with(Cell::get).unwrap_or(true) {
        return;
    }
    match value {
        Some(v) => external::push(ctx.handle, v),
        None => external::pop(ctx.handle),
    }
}

/// Runs `emit` with the external ids of CUPTI call `correlation` pushed on this thread's
/// stacks of their contexts.
fn with_external_ids(correlation: u32, emit: impl FnOnce()) {
    // Relaxed: a hint; a call that stored ids did so before CUPTI could deliver its records.
    if !external::ANY.load(Ordering::Relaxed) {
        return emit();
    }
    let Some(ids) = external::lookup(correlation) else { return emit() };
    let _ = MIRRORING.try_with(|m| m.set(true));
    let mut pushed = [None; external::MAX_CONTEXTS_CARRIED];
    for (slot, &(h, v)) in pushed.iter_mut().zip(&ids) {
        if h != 0 {
            let ctx = offtrace_core::ContextId { handle: h };
            if offtrace_core::push_external_correlation_id(ctx, 0, v).is_ok() {
                *slot = Some(ctx);
            }
        }
    }
    emit();
    for ctx in pushed.into_iter().flatten() {
        let _ = offtrace_core::pop_external_correlation_id(ctx, 0);
    }
    let _ = MIRRORING.try_with(|m| m.set(false));
}

/// A C string pointer as a `String`.
fn name_of(p: *const c_char) -> String {
    // SAFETY: callers pass CUPTI strings or null.
    unsafe { activity::c_str(p) }.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_switch_names_each_subscription() {
        let on = Plan { runtime: true, driver: true, activity: true, empty: false };
        assert_eq!(Plan::parse(None), on);
        assert_eq!(Plan::parse(Some("1")), on);
        assert_eq!(Plan::parse(Some("0")), Plan { runtime: false, ..on });
        assert_eq!(Plan::parse(Some("none")), Plan { runtime: false, driver: false, ..on });
        assert_eq!(Plan::parse(Some(" empty ")), Plan { empty: true, ..on });
    }

    #[test]
    fn measurement_phases_are_parts_of_the_started_plan() {
        // Started without runtime callbacks: no phase turns them on.
        let started = Plan::parse(Some("0"));
        for p in 0..=6 {
            let plan = Plan::phase(started, p).expect("phases 0..=6 exist");
            assert!(!plan.runtime, "phase {p}");
        }
        let on = Plan::parse(None);
        assert_eq!(Plan::phase(on, 0), Some(Plan::default()));
        assert_eq!(Plan::phase(on, 1), Some(on));
        assert_eq!(Plan::phase(on, 2), Some(Plan { activity: true, ..Plan::default() }));
        assert_eq!(Plan::phase(on, 3), Some(Plan { empty: true, ..on }));
        assert_eq!(Plan::phase(on, 4), Some(Plan { driver: false, ..on }));
        assert_eq!(Plan::phase(on, 5), Some(Plan { activity: false, ..on }));
        assert_eq!(Plan::phase(on, 6), Some(Plan { runtime: false, ..on }));
        assert_eq!(Plan::phase(on, 7), None);
    }

    #[test]
    fn launch_rules_resolve_geometry_once() {
        let rules = launch_rules(ApiDomain::Driver);
        let f = |n: &str| ApiDomain::Driver.functions().iter().find(|f| f.name == n).expect("function");
        let plain = rules[f("cuLaunchKernel").id as usize];
        assert!(plain.active);
        assert_eq!(plain.config, NONE);
        assert_eq!(plain.func, 0);
        assert_eq!(plain.params, 9);
        assert_eq!(plain.geometry, [1, 2, 3, 4, 5, 6], "gridDimX..Z, blockDimX..Z follow f");
        let ex = rules[f("cuLaunchKernelEx").id as usize];
        assert!(ex.active);
        assert_ne!(ex.config, NONE);
        assert_eq!(ex.geometry, [NONE; 6], "cuLaunchKernelEx passes its geometry in the config");
        assert!(!rules[f("cuMemAlloc_v2").id as usize].active);
    }

    #[test]
    fn capture_rules_name_the_begin_and_end_of_every_capture_call() {
        for domain in [ApiDomain::Runtime, ApiDomain::Driver] {
            let rules = capture_rules(domain);
            let named = |r: u8| -> Vec<&str> {
                let mut v: Vec<&str> =
                    domain.functions().iter().filter(|f| rules[f.id as usize] == r).map(|f| f.name).collect();
                v.sort_unstable();
                v
            };
            let (begins, ends) = (named(CAPTURE_BEGIN), named(CAPTURE_END));
            let p = if domain == ApiDomain::Runtime { "cuda" } else { "cu" };
            assert!(begins.iter().any(|n| n.starts_with(&format!("{p}StreamBeginCapture"))), "{begins:?}");
            assert!(ends.iter().any(|n| n.starts_with(&format!("{p}StreamEndCapture"))), "{ends:?}");
            assert!(
                begins.iter().chain(&ends).all(|n| n.contains("StreamBeginCapture") || n.contains("StreamEndCapture"))
            );
            assert!(!begins.iter().chain(&ends).any(|n| n.contains("GetCaptureInfo") || n.contains("IsCapturing")));
        }
    }

    #[test]
    fn a_capture_counts_from_its_begin_to_its_end_and_never_below_zero() {
        let before = CAPTURES.load(Ordering::Relaxed);
        note_capture(CAPTURE_BEGIN, 0);
        note_capture(CAPTURE_BEGIN, 1); // failed: no capture
        assert_eq!(CAPTURES.load(Ordering::Relaxed), before + 1);
        note_capture(CAPTURE_END, CAPTURE_INVALIDATED);
        assert_eq!(CAPTURES.load(Ordering::Relaxed), before);
        if before == 0 {
            note_capture(CAPTURE_END, 0);
            assert_eq!(CAPTURES.load(Ordering::Relaxed), 0);
        }
    }

    #[test]
    fn launch_rules_find_the_stream_of_each_launch() {
        let rules = launch_rules(ApiDomain::Driver);
        let f = |n: &str| ApiDomain::Driver.functions().iter().find(|f| f.name == n).expect("function");
        let plain = rules[f("cuLaunchKernel").id as usize];
        assert_eq!(plain.stream, 8, "hStream follows sharedMemBytes");
        assert!(!plain.per_thread);
        let ptsz = rules[f("cuLaunchKernel_ptsz").id as usize];
        assert_eq!(ptsz.stream, 8);
        assert!(ptsz.per_thread, "a _ptsz entry point's NULL stream is the thread's own");
        let ex = rules[f("cuLaunchKernelEx").id as usize];
        assert_eq!(ex.stream, NONE, "cuLaunchKernelEx passes its stream in the config");
        assert!(rules[f("cuLaunchKernelEx_ptsz").id as usize].per_thread);
        assert_eq!(l::CUlaunchConfig::hStream, (32, 8));
    }

    #[test]
    fn runtime_launch_rules_read_the_runtime_parameters() {
        let rules = launch_rules(ApiDomain::Runtime);
        let f = |n: &str| ApiDomain::Runtime.functions().iter().find(|f| f.name == n).expect("function");
        let plain = rules[f("cudaLaunchKernel").id as usize];
        assert!(plain.active && plain.runtime && !plain.per_thread);
        // cudaLaunchKernel(func, gridDim, blockDim, args, sharedMem, stream), dim3 split in three.
        assert_eq!((plain.func, plain.geometry, plain.params, plain.stream), (0, [1, 2, 3, 4, 5, 6], 7, 9));
        assert_eq!(plain.config, NONE);
        let ptsz = rules[f("cudaLaunchKernel_ptsz").id as usize];
        assert!(ptsz.active && ptsz.per_thread && ptsz.stream == 9);
        let coop = rules[f("cudaLaunchCooperativeKernel").id as usize];
        assert_eq!((coop.func, coop.params, coop.stream), (0, 7, 9));
        let ex = rules[f("cudaLaunchKernelExC").id as usize];
        assert_eq!((ex.config, ex.func, ex.params, ex.stream, ex.geometry), (0, 1, 2, NONE, [NONE; 6]));
        assert!(rules[f("cudaLaunchKernelExC_ptsz").id as usize].per_thread);
        // cudaLaunchConfig_t: dim3 gridDim, dim3 blockDim, size_t dynamicSmemBytes, cudaStream_t.
        assert_eq!((l::cudaLaunchConfig_t::gridDim_x, l::cudaLaunchConfig_t::blockDim_z), ((0, 4), (20, 4)));
        assert_eq!(l::cudaLaunchConfig_t::stream, (32, 8));
        let launches = rules.iter().filter(|r| r.active).count();
        assert_eq!(launches, 6, "the runtime's six launch entry points, nothing else");
        assert!(launch_rules(ApiDomain::Driver).iter().all(|r| !r.runtime));
    }

    #[test]
    fn each_launch_mode_takes_the_dispatch_from_one_place() {
        use LaunchMode as M;
        assert_eq!(M::parse(None), M::Driver, "every launch from the driver callbacks by default");
        assert_eq!(M::parse(Some("driver")), M::Driver);
        assert_eq!(M::parse(Some("runtime")), M::Full);
        assert_eq!(M::parse(Some("0")), M::Off);
        assert_eq!(M::parse(Some("noargs")), M::NoArgs);
        assert_eq!(M::parse(Some("callbacks")), M::CallbacksOnly);
        for m in [M::Full, M::NoArgs, M::CallbacksOnly] {
            assert!(m.runtime_dispatch() && !m.driver_callbacks(), "{m:?}: runtime callbacks only");
        }
        assert!(M::Driver.driver_callbacks() && !M::Driver.runtime_dispatch());
        assert!(!M::Off.driver_callbacks() && !M::Off.runtime_dispatch(), "0: no launch-time dispatch");
    }

    #[test]
    fn driver_launch_records_cover_the_driver_launches_only_without_their_callbacks() {
        let ids = driver_launch_record_ids(LaunchMode::Full, false);
        let names: Vec<&str> = ids.iter().map(|&i| ApiDomain::Driver.function(i).expect("id").name).collect();
        assert_eq!(names.len(), 6, "{names:?}");
        for n in ["cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cuLaunchKernel_ptsz"] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        assert!(names.iter().all(|n| n.starts_with("cuLaunch")));
        assert!(driver_launch_record_ids(LaunchMode::Driver, false).is_empty(), "their callbacks give them");
        assert!(driver_launch_record_ids(LaunchMode::Full, true).is_empty(), "every driver call is traced");
        assert!(driver_launch_record_ids(LaunchMode::Off, false).is_empty());
    }

    #[test]
    fn learning_stops_after_a_quiet_period_and_resumes_at_an_unknown_stub() {
        assert_eq!(learning_switch(true, false, false), None, "before the first launch: keep learning");
        assert_eq!(learning_switch(true, true, true), None, "still meeting new kernels: keep learning");
        assert_eq!(learning_switch(true, false, true), Some(false), "a quiet period: driver launch callbacks off");
        assert_eq!(learning_switch(false, false, true), None);
        assert_eq!(learning_switch(false, true, true), Some(true), "an unknown stub: on again");
    }

    #[test]
    fn cuptis_thread_ids_map_to_the_threads_that_noted_them() {
        std::thread::spawn(|| {
            note_thread();
            // SAFETY: no preconditions.
            let (pthread, tid) = unsafe { (libc::pthread_self() as u32, libc::gettid() as u32) };
            assert_eq!(thread_of(pthread), tid, "a pthread id");
            assert_eq!(thread_of(tid), tid, "an OS thread id");
        })
        .join()
        .expect("thread");
        assert_eq!(thread_of(0), std::process::id(), "a thread never seen: the main thread");
    }

    /// The order CUPTI reported the CUDA C workload's graph in on the H100 (run F,
    /// `docs/cuda-runs/run-f/workload-dump-graph.jsonl`): every edge's ends are nodes of the
    /// trace, each node once.
    #[test]
    fn every_graph_edge_joins_nodes_created_once() {
        enum Ev {
            Node(u64),
            Edge(u64, u64),
        }
        use Ev::*;
        let (g1, g2, g3) = (1u64 << 32, 2u64 << 32, 3u64 << 32);
        let events = [
            Node(g1),
            Edge(g1, g1 + 1),
            Node(g1 + 1),
            Edge(g1 + 1, g1 + 2),
            Node(g1 + 2),
            Edge(g1 + 2, g1 + 3),
            Node(g1 + 3),
            Node(g2),
            Node(g2),
            Node(g2 + 1),
            Node(g2 + 1),
            Edge(g2, g2 + 1),
            Edge(g3, g3 + 1),
            Edge(g3 + 1, g3 + 2),
            Node(g2 + 4),
            Edge(g2 + 4, g2 + 1),
        ];
        let mut nodes = GraphNodes::default();
        let mut created = Vec::new();
        let mut unresolved = 0;
        for e in events {
            match e {
                Node(n) => {
                    if nodes.first_sight(n) {
                        created.push(n);
                    }
                }
                Edge(a, b) => {
                    created.extend(nodes.edge(a, b).into_iter().flatten());
                    unresolved += usize::from(!created.contains(&a) || !created.contains(&b));
                }
            }
        }
        assert_eq!(unresolved, 0);
        assert_eq!(created, [g1, g1 + 1, g1 + 2, g1 + 3, g2, g2 + 1, g3, g3 + 1, g3 + 2, g2 + 4], "each node once");
        assert!(!nodes.first_sight(0), "no node");
    }

    /// A stand-in for `cuGraphNodeGetType`: nodes at addresses 0x10.. are memsets, 0x20..
    /// memcpys, 0x30.. kernels; any other is an invalid handle (CUDA_ERROR_INVALID_VALUE).
    unsafe extern "C" fn fake_node_get_type(node: *mut c_void, t: *mut u32) -> i32 {
        let ty = match node as usize & !0xf {
            0x10 => l::CU_GRAPH_NODE_TYPE_MEMSET,
            0x20 => l::CU_GRAPH_NODE_TYPE_MEMCPY,
            0x30 => l::CU_GRAPH_NODE_TYPE_KERNEL,
            _ => return 1,
        };
        // SAFETY: t is the caller's out-param.
        unsafe { *t = ty as u32 };
        0
    }

    /// CUPTI's field said kernel (0) for the workload's memset and memcpy nodes: the driver's
    /// answer wins; the field stands where the driver has none or fails.
    #[test]
    fn graph_node_types_come_from_the_driver() {
        let get: Option<GraphNodeTypeFn> = Some(fake_node_get_type);
        let kernel = l::CU_GRAPH_NODE_TYPE_KERNEL as u32;
        let node = |a: usize| a as *mut c_void;
        assert_eq!(graph_node_type(get, node(0x11), kernel), l::CU_GRAPH_NODE_TYPE_MEMSET as u32);
        assert_eq!(graph_node_type(get, node(0x22), kernel), l::CU_GRAPH_NODE_TYPE_MEMCPY as u32);
        assert_eq!(graph_node_type(get, node(0x33), 7), kernel);
        assert_eq!(graph_node_type(get, node(0x99), 7), 7, "driver error: CUPTI's field");
        assert_eq!(graph_node_type(get, std::ptr::null_mut(), 7), 7, "no node");
        assert_eq!(graph_node_type(None, node(0x11), 7), 7, "no driver function");
        assert!(!BUSY.with(Cell::get), "the guard is lowered again");
        let names: Vec<_> = [0x11, 0x33, 0x33, 0x22]
            .map(|a| emit::graph_node_type_name(graph_node_type(get, node(a), kernel)).to_str().unwrap_or(""))
            .to_vec();
        assert_eq!(names, ["memset", "kernel", "kernel", "memcpy"]);
    }

    #[test]
    fn default_stream_handles_map_to_the_default_streams() {
        assert_eq!(stream_key(0, false), LEGACY_STREAM, "NULL in a plain entry point: legacy stream");
        assert_eq!(stream_key(0, true), PER_THREAD_STREAM, "NULL in a _ptsz entry point: the thread's");
        assert_eq!(stream_key(1, true), LEGACY_STREAM, "CU_STREAM_LEGACY whatever the entry point");
        assert_eq!(stream_key(2, false), PER_THREAD_STREAM, "CU_STREAM_PER_THREAD whatever the entry point");
        assert_eq!(stream_key(0x7f00_1234_5670, false), 0x7f00_1234_5670, "a created stream is its handle");
    }

    #[test]
    fn default_kinds_are_kernels_copies_and_memsets() {
        let k = |list: &str| kinds_named(list).into_iter().copied().collect::<Vec<_>>();
        assert_eq!(
            k(DEFAULT_ACTIVITY),
            [
                l::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                l::CUPTI_ACTIVITY_KIND_MEMCPY,
                l::CUPTI_ACTIVITY_KIND_MEMCPY2,
                l::CUPTI_ACTIVITY_KIND_MEMSET
            ]
        );
        assert_eq!(k("all"), ACTIVITY_KINDS);
        assert_eq!(k(" sync ,marker"), [l::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, l::CUPTI_ACTIVITY_KIND_MARKER]);
        assert!(k("").is_empty());
    }

    #[test]
    fn buffers_come_back_zeroed_and_are_reused() {
        let (mut p, mut size) = (std::ptr::null_mut(), 0usize);
        // SAFETY: valid out-pointers.
        unsafe { buffer_requested(&mut p, &mut size, std::ptr::null_mut()) };
        assert!(!p.is_null());
        assert_eq!(size, BUFFER_SIZE);
        // SAFETY: p is BUFFER_SIZE bytes.
        let b = unsafe { std::slice::from_raw_parts_mut(p, BUFFER_SIZE) };
        assert!(b.iter().all(|&x| x == 0), "a fresh buffer is zeroed");
        b[..4096].fill(0xab);
        release_buffer(p, 4096);
        let mut q = std::ptr::null_mut();
        // SAFETY: as above.
        unsafe { buffer_requested(&mut q, &mut size, std::ptr::null_mut()) };
        assert_eq!(q, p, "the spare is handed out again");
        // SAFETY: q is BUFFER_SIZE bytes.
        let b = unsafe { std::slice::from_raw_parts(q, BUFFER_SIZE) };
        assert!(b.iter().all(|&x| x == 0), "a reused buffer is zeroed where CUPTI wrote");
        release_buffer(q, 0);
    }

    #[test]
    fn external_ids_follow_the_threads_stacks() {
        assert_eq!(external::current(), None);
        mirror_external(offtrace_core::ContextId { handle: 7 }, Some(70));
        mirror_external(offtrace_core::ContextId { handle: 9 }, Some(90));
        mirror_external(offtrace_core::ContextId { handle: 7 }, Some(71));
        let ids = external::current().expect("pushed");
        assert_eq!(&ids[..2], &[(7, 71), (9, 90)], "the top of each context's stack, newest first");
        external::remember_call(1234);
        assert_eq!(external::lookup(1234), Some(ids));
        assert_eq!(external::lookup(1235), None);
        mirror_external(offtrace_core::ContextId { handle: 7 }, None);
        let mut ids = external::current().expect("pushed");
        ids.sort_unstable();
        assert_eq!(&ids[2..], &[(7, 70), (9, 90)], "the older id of context 7 is its top again");
        mirror_external(offtrace_core::ContextId { handle: 7 }, None);
        mirror_external(offtrace_core::ContextId { handle: 9 }, None);
        assert_eq!(external::current(), None);
        // Another thread has its own stacks.
        mirror_external(offtrace_core::ContextId { handle: 7 }, Some(1));
        std::thread::spawn(|| assert_eq!(external::current(), None)).join().expect("thread");
        mirror_external(offtrace_core::ContextId { handle: 7 }, None);
    }

    #[test]
    fn device_records_carry_the_launching_calls_external_ids() {
        use std::sync::Mutex;
        static SEEN: Mutex<Vec<u64>> = Mutex::new(Vec::new());
        let ctx = offtrace_core::create_context().expect("context");
        offtrace_core::configure_callback_tracing_closure(ctx, offtrace_core::Kind::Marker, None, |r, _| {
            SEEN.lock().expect("lock").push(r.correlation_id.external.value);
        })
        .expect("configure");
        offtrace_core::start_context(ctx).expect("start");
        mirror_external(ctx, Some(0x5eed));
        external::remember_call(77);
        mirror_external(ctx, None);
        // On another thread (CUPTI's buffer thread): the record of call 77 carries the id, a
        // record of another call none.
        std::thread::spawn(|| {
            let emit = || {
                let p = offtrace_core::MarkerPayload { message: c"m".as_ptr(), range_id: 0 };
                offtrace_core::emit_activity(
                    offtrace_core::Kind::Marker,
                    offtrace_core::marker_op::MARK,
                    1,
                    5,
                    5,
                    offtrace_core::Payload::Marker(&p),
                );
            };
            with_external_ids(77, emit);
            with_external_ids(78, emit);
        })
        .join()
        .expect("thread");
        assert_eq!(*SEEN.lock().expect("lock"), [0x5eed, 0]);
        offtrace_core::destroy_context(ctx).expect("destroy");
    }
}
