//! NVIDIA GPU metrics through CUPTI's profiling APIs (CUDA 12.6+ / 13), loaded with `dlopen` at
//! first use; nothing here is linked, so a machine without CUDA builds, lists and tests the rest.
//!
//! - **Range profiler** (`cupti_range_profiler.h`), the event-based group `cupti.range_profiler`:
//!   auto ranges with kernel replay, so every kernel launched between a query's begin
//!   ([`RangeProfiler::start`]) and end ([`RangeProfiler::stop`]) is one range with its own
//!   values (the kernel is replayed until every pass of the metrics is collected).
//! - **PM sampling** (`cupti_pmsampling.h`), the time-based group `cupti.pm_sampling`: the GPU
//!   samples its performance monitors every interval into a hardware buffer by itself;
//!   [`PmSampler::decode`] turns what is there into samples with GPU start/end timestamps.
//!
//! Both compute metric values with the profiler host API (`cupti_profiler_host.h`:
//! `cuptiProfilerHostEvaluateToGpuValues`), from the counter data image CUPTI fills.
//!
//! Every CUPTI profiler function takes one parameter struct whose first field is its size (the
//! offset of its last field plus that field's size, `CUPTI_PROFILER_STRUCT_SIZE`); the structs
//! here copy the CUDA 13.0 headers field by field (tests check sizes against them).

#![allow(unsafe_code)] // dlopen/dlsym, calls through C function pointers, C structs

use std::ffi::{CStr, CString, c_char, c_void};
use std::sync::OnceLock;

use crate::error::MetricsError;

/// `CUptiResult`; 0 is `CUPTI_SUCCESS`.
type CuptiResult = u32;
/// Every profiler entry point: `CUptiResult f(Params*)`.
type ParamsFn = unsafe extern "C" fn(*mut c_void) -> CuptiResult;

/// `CUPTI_PROFILER_TYPE_RANGE_PROFILER` / `_PM_SAMPLING`.
const PROFILER_TYPE_RANGE: u32 = 0;
const PROFILER_TYPE_PM_SAMPLING: u32 = 1;
/// `CUPTI_AutoRange`, `CUPTI_KernelReplay`.
const AUTO_RANGE: u32 = 1;
const KERNEL_REPLAY: u32 = 2;
/// `CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL`, `..._APPEND_MODE_KEEP_OLDEST`.
const TRIGGER_GPU_TIME_INTERVAL: u32 = 1;
const APPEND_KEEP_OLDEST: u32 = 0;

macro_rules! params {
    ($name:ident { $($f:ident : $t:ty),* $(,)? } last $last:ident) => {
        #[repr(C)]
        #[allow(dead_code)] // fields CUPTI writes that offtrace does not read
        struct $name {
            struct_size: usize,
            p_priv: *mut c_void,
            $($f: $t),*
        }
        impl $name {
            /// Zeroed (every field is an integer or a raw pointer) with its `structSize`.
            fn new() -> Self {
                // SAFETY: integers and raw pointers only: all-zero is a valid value.
                let mut s: Self = unsafe { std::mem::zeroed() };
                s.struct_size = std::mem::offset_of!($name, $last) + field_size(|x: &$name| &x.$last);
                s
            }
        }
    };
}

fn field_size<S, F>(_: fn(&S) -> &F) -> usize {
    std::mem::size_of::<F>()
}

params!(ProfilerInitialize {} last p_priv);
params!(DeviceGetChipName { device_index: usize, p_chip_name: *const c_char } last p_chip_name);
params!(GetCounterAvailability { ctx: *mut c_void, image_size: usize, image: *mut u8 } last image);
params!(RangeEnable { ctx: *mut c_void, object: *mut c_void } last object);
params!(RangeObject { object: *mut c_void } last object);
params!(HostInitialize { profiler_type: u32, chip: *const c_char, availability: *const u8, host: *mut c_void } last host);
params!(HostObject { host: *mut c_void } last host);
params!(HostAddMetrics { host: *mut c_void, names: *const *const c_char, count: usize } last count);
params!(HostConfigSize { host: *mut c_void, size: usize } last size);
params!(HostConfigImage { host: *mut c_void, size: usize, image: *mut u8 } last image);
params!(HostPasses { size: usize, image: *mut u8, passes: usize } last passes);
params!(RangeDataSize {
    object: *mut c_void,
    names: *const *const c_char,
    count: usize,
    max_ranges: usize,
    max_tree_nodes: u32,
    size: usize,
} last size);
params!(DataInitialize { object: *mut c_void, size: usize, data: *mut u8 } last data);
params!(RangeSetConfig {
    object: *mut c_void,
    config_size: usize,
    config: *const u8,
    data_size: usize,
    data: *mut u8,
    range: u32,
    replay: u32,
    max_ranges_per_pass: usize,
    nesting_levels: u16,
    min_nesting_level: u16,
    pass_index: usize,
    target_nesting_level: u16,
} last target_nesting_level);
params!(RangeStop { object: *mut c_void, pass_index: usize, target_nesting_level: usize, all_passes_submitted: u8 } last all_passes_submitted);
params!(RangeDecode { object: *mut c_void, dropped: usize } last dropped);
params!(RangeDataInfo { data: *const u8, size: usize, ranges: usize } last ranges);
params!(HostRangeName { data: *const u8, size: usize, index: usize, delimiter: *const c_char, name: *const c_char } last name);
params!(HostEvaluate {
    host: *mut c_void,
    data: *const u8,
    size: usize,
    index: usize,
    names: *const *const c_char,
    count: usize,
    values: *mut f64,
} last values);
params!(PmEnable { device_index: usize, object: *mut c_void } last object);
params!(PmObject { object: *mut c_void } last object);
params!(PmAvailability { device_index: usize, image_size: usize, image: *mut u8 } last image);
params!(PmSetConfig {
    object: *mut c_void,
    config_size: usize,
    config: *const u8,
    hardware_buffer_size: usize,
    interval: u64,
    trigger: u32,
    append: u32,
} last append);
params!(PmDataSize { object: *mut c_void, names: *const *const c_char, count: usize, max_samples: u32, size: usize } last size);
params!(PmDecode { object: *mut c_void, data: *mut u8, size: usize, stop_reason: u32, overflow: u8 } last overflow);
params!(PmDataInfo { data: *const u8, size: usize, total: usize, populated: usize, completed: usize } last completed);
params!(PmSampleInfo { object: *mut c_void, data: *const u8, size: usize, index: usize, start: u64, end: u64 } last end);

/// The resolved library.
struct Api {
    lib: *mut c_void,
    get_result_string: Option<unsafe extern "C" fn(CuptiResult, *mut *const c_char) -> CuptiResult>,
    get_timestamp: Option<unsafe extern "C" fn(*mut u64) -> CuptiResult>,
}

// SAFETY: a library handle that is never closed and C function pointers into it; CUPTI's
// profiler entry points may be called from any thread (offtrace serialises each object's use).
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

fn dlsym_in(lib: *mut c_void, name: &CStr) -> *mut c_void {
    // SAFETY: a live dlopen handle (or RTLD_DEFAULT) and a NUL-terminated name.
    unsafe { libc::dlsym(lib, name.as_ptr()) }
}

/// The CUPTI the process already traces with (see [`prefer_library`]).
static PREFERRED: OnceLock<String> = OnceLock::new();

/// Makes `path` — the CUPTI a host (the CUDA backend) has loaded for its own tracing — the
/// first candidate, so this crate calls the same copy: two CUPTIs in one process would each
/// take the driver's callbacks and profiler state for their own. Takes effect only before the
/// first use of CUPTI here; returns whether it did.
pub fn prefer_library(path: &str) -> bool {
    PREFERRED.set(path.to_owned()).is_ok() && API.get().is_none()
}

/// The file and load address of the CUPTI this crate calls (`dladdr` of one of its
/// functions), or `None` when none is loaded. Equal load addresses are one loaded object.
pub fn loaded_library() -> Option<(String, usize)> {
    let api = API.get()?.as_ref()?;
    object_of(dlsym_in(api.lib, c"cuptiRangeProfilerEnable") as usize)
}

/// The file and load address of the loaded object holding address `addr` (an address, never
/// read).
pub fn object_of(addr: usize) -> Option<(String, usize)> {
    if addr == 0 {
        return None;
    }
    // SAFETY: all-zero is a valid Dl_info (pointers and integers).
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: any address may be asked about; info is a valid out-parameter.
    if unsafe { libc::dladdr(addr as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
    let name = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned();
    Some((name, info.dli_fbase as usize))
}

fn load() -> Option<Api> {
    let mut candidates: Vec<String> = PREFERRED.get().cloned().into_iter().collect();
    candidates.extend(std::env::var("OFFTRACE_CUPTI_LIBRARY"));
    candidates.extend(
        [
            "libcupti.so.13",
            "libcupti.so",
            "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
            "/usr/local/cuda-13.0/extras/CUPTI/lib64/libcupti.so",
        ]
        .map(String::from),
    );
    let lib = candidates.iter().find_map(|p| {
        let c = CString::new(p.as_str()).ok()?;
        // SAFETY: dlopen with a NUL-terminated path; null means absent. CUPTI initialises
        // nothing at load: its profiler starts at cuptiProfilerInitialize.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        (!h.is_null()).then_some(h)
    })?;
    if dlsym_in(lib, c"cuptiRangeProfilerEnable").is_null() {
        return None; // a CUPTI older than the range profiler (CUDA 12.6)
    }
    let get = |l: *mut c_void, n: &CStr| {
        let p = if l.is_null() { std::ptr::null_mut() } else { dlsym_in(l, n) };
        (!p.is_null()).then_some(p)
    };
    // SAFETY (both transmutes): each symbol is the C function of the prototype named (cupti.h,
    // cupti_activity.h), of pointer size.
    Some(Api {
        lib,
        get_result_string: get(lib, c"cuptiGetResultString").map(|p| unsafe { std::mem::transmute(p) }),
        get_timestamp: get(lib, c"cuptiGetTimestamp").map(|p| unsafe { std::mem::transmute(p) }),
    })
}

static API: OnceLock<Option<Api>> = OnceLock::new();

fn api() -> Option<&'static Api> {
    API.get_or_init(load).as_ref()
}

/// Whether a CUPTI with the range profiler and PM sampling can be loaded here.
pub fn available() -> bool {
    api().is_some()
}

/// What failed last (function and CUPTI's message), for tools and the evidence runs.
pub fn last_error() -> String {
    LAST_ERROR.lock().map(|s| s.clone()).unwrap_or_default()
}

static LAST_ERROR: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// Calls CUPTI's `name` with `params`; a failure is kept for [`last_error`].
fn call<P>(name: &CStr, params: &mut P) -> Result<(), MetricsError> {
    let api = api().ok_or(MetricsError::UnsupportedFeature)?;
    let f = dlsym_in(api.lib, name);
    if f.is_null() {
        set_error(name, 0, "symbol not found");
        return Err(MetricsError::UnsupportedFeature);
    }
    if trace() {
        eprintln!("offtrace cupti: {} (thread {:?})", name.to_string_lossy(), std::thread::current().id());
    }
    // SAFETY: `f` is CUPTI's `name`, a `CUptiResult f(Params*)` whose parameter struct `P` copies
    // the header's layout, with its size set by `new()`; `params` is live for the call.
    let r = unsafe { std::mem::transmute::<*mut c_void, ParamsFn>(f)((params as *mut P).cast()) };
    if r == 0 {
        return Ok(());
    }
    let mut msg: *const c_char = std::ptr::null();
    if let Some(s) = api.get_result_string {
        // SAFETY: cuptiGetResultString writes a pointer to a static string.
        unsafe { s(r, &mut msg) };
    }
    let text = if msg.is_null() {
        String::new()
    } else {
        // SAFETY: CUPTI's static NUL-terminated message.
        unsafe { CStr::from_ptr(msg) }.to_string_lossy().into_owned()
    };
    set_error(name, r, &text);
    Err(match r {
        // CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35)
        35 => MetricsError::InsufficientPermissions,
        // CUPTI_ERROR_NOT_INITIALIZED (15), _INVALID_CONTEXT (3)
        15 | 3 => MetricsError::Uninitialized,
        // CUPTI_ERROR_INVALID_PARAMETER (1), _INVALID_METRIC_NAME (41? varies)
        1 => MetricsError::InvalidArgument,
        _ => MetricsError::Unknown,
    })
}

/// `OFFTRACE_CUPTI_TRACE=1`: every CUPTI call named on stderr before it is made (diagnosing a
/// driver or CUPTI failure on a GPU machine; off by default: nothing is printed into the app).
fn trace() -> bool {
    static T: OnceLock<bool> = OnceLock::new();
    *T.get_or_init(|| std::env::var_os("OFFTRACE_CUPTI_TRACE").is_some_and(|v| v == "1"))
}

fn set_error(name: &CStr, code: u32, text: &str) {
    if let Ok(mut e) = LAST_ERROR.lock() {
        *e = format!("{}: {code} {text}", name.to_string_lossy());
    }
}

/// CUPTI's timestamp now (ns), the clock of PM sampling's sample timestamps.
pub fn gpu_timestamp() -> Option<u64> {
    let f = api()?.get_timestamp?;
    let mut t = 0u64;
    // SAFETY: writes a u64 into a live local.
    (unsafe { f(&mut t) } == 0).then_some(t)
}

/// The calling thread's current CUDA context (null when none or when libcuda is not loaded: a
/// process with a CUDA context has it loaded, so it is only looked up, never loaded here).
pub fn current_context() -> *mut c_void {
    if api().is_none() {
        return std::ptr::null_mut();
    }
    // SAFETY: RTLD_NOLOAD only finds an already loaded library (a reference it holds is never
    // released: libcuda stays loaded for the process's life anyway).
    let cuda = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if cuda.is_null() {
        return std::ptr::null_mut();
    }
    let p = dlsym_in(cuda, c"cuCtxGetCurrent");
    if p.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: `cuCtxGetCurrent` is `CUresult (CUcontext*)` (cuda.h), of pointer size.
    let f: unsafe extern "C" fn(*mut *mut c_void) -> i32 = unsafe { std::mem::transmute(p) };
    let mut ctx = std::ptr::null_mut();
    // SAFETY: writes a CUcontext into a live local.
    if unsafe { f(&mut ctx) } == 0 { ctx } else { std::ptr::null_mut() }
}

fn profiler_init() -> Result<(), MetricsError> {
    static INIT: OnceLock<Result<(), MetricsError>> = OnceLock::new();
    *INIT.get_or_init(|| call(c"cuptiProfilerInitialize", &mut ProfilerInitialize::new()))
}

fn chip_name(device_index: usize) -> Result<CString, MetricsError> {
    let mut p = DeviceGetChipName::new();
    p.device_index = device_index;
    call(c"cuptiDeviceGetChipName", &mut p)?;
    if p.p_chip_name.is_null() {
        return Err(MetricsError::Unknown);
    }
    // SAFETY: CUPTI's NUL-terminated chip name.
    Ok(unsafe { CStr::from_ptr(p.p_chip_name) }.to_owned())
}

/// Metric names as C strings and the pointer array CUPTI takes.
struct Names {
    _owned: Vec<CString>,
    ptrs: Vec<*const c_char>,
}

impl Names {
    fn new(names: &[String]) -> Result<Self, MetricsError> {
        let owned: Vec<CString> = names
            .iter()
            .map(|n| CString::new(n.as_str()))
            .collect::<Result<_, _>>()
            .map_err(|_| MetricsError::InvalidArgument)?;
        let ptrs = owned.iter().map(|c| c.as_ptr()).collect();
        Ok(Self { _owned: owned, ptrs })
    }
}

/// A profiler host object (metric configuration and evaluation) for one chip. It keeps the
/// chip name and the counter availability image it was given: CUPTI's documentation does not say
/// it copies them, so they live as long as the object.
struct Host {
    host: *mut c_void,
    _chip: CString,
    _availability: Vec<u8>,
}

impl Host {
    fn new(kind: u32, chip: CString, availability: Vec<u8>) -> Result<Self, MetricsError> {
        let mut p = HostInitialize::new();
        p.profiler_type = kind;
        p.chip = chip.as_ptr();
        p.availability = if availability.is_empty() { std::ptr::null() } else { availability.as_ptr() };
        call(c"cuptiProfilerHostInitialize", &mut p)?;
        Ok(Self { host: p.host, _chip: chip, _availability: availability })
    }

    /// The configuration image for `names` and how many passes it takes.
    fn config(&self, names: &Names) -> Result<(Vec<u8>, usize), MetricsError> {
        let mut add = HostAddMetrics::new();
        add.host = self.host;
        add.names = names.ptrs.as_ptr();
        add.count = names.ptrs.len();
        call(c"cuptiProfilerHostConfigAddMetrics", &mut add)?;
        let mut size = HostConfigSize::new();
        size.host = self.host;
        call(c"cuptiProfilerHostGetConfigImageSize", &mut size)?;
        let mut image = vec![0u8; size.size];
        let mut get = HostConfigImage::new();
        get.host = self.host;
        get.size = image.len();
        get.image = image.as_mut_ptr();
        call(c"cuptiProfilerHostGetConfigImage", &mut get)?;
        let mut passes = HostPasses::new();
        passes.size = image.len();
        passes.image = image.as_mut_ptr();
        call(c"cuptiProfilerHostGetNumOfPasses", &mut passes)?;
        Ok((image, passes.passes))
    }

    fn evaluate(&self, data: &[u8], index: usize, names: &Names, out: &mut [f64]) -> Result<(), MetricsError> {
        let mut p = HostEvaluate::new();
        p.host = self.host;
        p.data = data.as_ptr();
        p.size = data.len();
        p.index = index;
        p.names = names.ptrs.as_ptr();
        p.count = names.ptrs.len();
        p.values = out.as_mut_ptr();
        call(c"cuptiProfilerHostEvaluateToGpuValues", &mut p)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let mut p = HostObject::new();
        p.host = self.host;
        let _ = call(c"cuptiProfilerHostDeinitialize", &mut p);
    }
}

/// A range profiler's host object, metric names, configuration image, passes and counter data.
type Configured = (Host, Names, Vec<u8>, usize, Vec<u8>);

/// One kernel's values from the range profiler.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeValues {
    /// The range's name: the kernel's (mangled) name in auto-range mode.
    pub name: String,
    /// One value per metric, in the profiler's metric order.
    pub values: Vec<f64>,
}

/// The range profiler on one CUDA context, configured for a metric list.
pub struct RangeProfiler {
    object: *mut c_void,
    host: Host,
    names: Names,
    config: Vec<u8>,
    data: Vec<u8>,
    passes: usize,
    max_ranges: usize,
    started: bool,
}

// SAFETY: CUPTI objects used from one thread at a time (the query pool's collector is behind a
// mutex); nothing in it is thread-affine.
unsafe impl Send for RangeProfiler {}

impl std::fmt::Debug for RangeProfiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeProfiler").field("passes", &self.passes).finish()
    }
}

impl RangeProfiler {
    /// Enables the range profiler on `ctx` (a `CUcontext` of device `device_index`) for
    /// `metrics`, keeping up to `max_ranges` kernels per query.
    pub fn new(
        ctx: *mut c_void,
        device_index: usize,
        metrics: &[String],
        max_ranges: usize,
    ) -> Result<Self, MetricsError> {
        if ctx.is_null() {
            return Err(MetricsError::Uninitialized);
        }
        profiler_init()?;
        let mut en = RangeEnable::new();
        en.ctx = ctx;
        call(c"cuptiRangeProfilerEnable", &mut en)?;
        let object = en.object;
        let build = || -> Result<Configured, MetricsError> {
            let chip = chip_name(device_index)?;
            let mut av = GetCounterAvailability::new();
            av.ctx = ctx;
            call(c"cuptiProfilerGetCounterAvailability", &mut av)?;
            let mut availability = vec![0u8; av.image_size];
            av.image = availability.as_mut_ptr();
            call(c"cuptiProfilerGetCounterAvailability", &mut av)?;
            let host = Host::new(PROFILER_TYPE_RANGE, chip, availability)?;
            let names = Names::new(metrics)?;
            let (config, passes) = host.config(&names)?;
            let mut ds = RangeDataSize::new();
            ds.object = object;
            ds.names = names.ptrs.as_ptr();
            ds.count = names.ptrs.len();
            ds.max_ranges = max_ranges;
            ds.max_tree_nodes = max_ranges as u32;
            call(c"cuptiRangeProfilerGetCounterDataSize", &mut ds)?;
            Ok((host, names, config, passes, vec![0u8; ds.size]))
        };
        match build() {
            Ok((host, names, config, passes, data)) => {
                Ok(Self { object, host, names, config, data, passes, max_ranges, started: false })
            }
            Err(e) => {
                let mut d = RangeObject::new();
                d.object = object;
                let _ = call(c"cuptiRangeProfilerDisable", &mut d);
                Err(e)
            }
        }
    }

    /// Passes (kernel replays) the metrics take.
    pub fn passes(&self) -> usize {
        self.passes
    }

    /// Begins a query: every kernel launched on the context from now is a range.
    pub fn start(&mut self) -> Result<(), MetricsError> {
        if self.started {
            return Err(MetricsError::NotAvailable);
        }
        let mut init = DataInitialize::new();
        init.object = self.object;
        init.size = self.data.len();
        init.data = self.data.as_mut_ptr();
        call(c"cuptiRangeProfilerCounterDataImageInitialize", &mut init)?;
        let mut sc = RangeSetConfig::new();
        sc.object = self.object;
        sc.config_size = self.config.len();
        sc.config = self.config.as_ptr();
        sc.data_size = self.data.len();
        sc.data = self.data.as_mut_ptr();
        sc.range = AUTO_RANGE;
        sc.replay = KERNEL_REPLAY;
        sc.max_ranges_per_pass = self.max_ranges;
        sc.nesting_levels = 1;
        sc.min_nesting_level = 1;
        sc.pass_index = 0;
        sc.target_nesting_level = 1;
        call(c"cuptiRangeProfilerSetConfig", &mut sc)?;
        let mut st = RangeObject::new();
        st.object = self.object;
        call(c"cuptiRangeProfilerStart", &mut st)?;
        self.started = true;
        Ok(())
    }

    /// Ends the query (the kernels must have completed: synchronise first) and returns one
    /// [`RangeValues`] per kernel.
    pub fn stop(&mut self) -> Result<Vec<RangeValues>, MetricsError> {
        if !self.started {
            return Err(MetricsError::InvalidArgument);
        }
        self.started = false;
        let mut sp = RangeStop::new();
        sp.object = self.object;
        call(c"cuptiRangeProfilerStop", &mut sp)?;
        let mut dec = RangeDecode::new();
        dec.object = self.object;
        call(c"cuptiRangeProfilerDecodeData", &mut dec)?;
        let mut info = RangeDataInfo::new();
        info.data = self.data.as_ptr();
        info.size = self.data.len();
        call(c"cuptiRangeProfilerGetCounterDataInfo", &mut info)?;
        let mut out = Vec::with_capacity(info.ranges);
        for i in 0..info.ranges {
            let mut rn = HostRangeName::new();
            rn.data = self.data.as_ptr();
            rn.size = self.data.len();
            rn.index = i;
            rn.delimiter = c"/".as_ptr();
            call(c"cuptiProfilerHostGetRangeName", &mut rn)?;
            let name = if rn.name.is_null() {
                String::new()
            } else {
                // SAFETY: CUPTI's NUL-terminated range name, valid until the next call.
                unsafe { CStr::from_ptr(rn.name) }.to_string_lossy().into_owned()
            };
            let mut values = vec![0f64; self.names.ptrs.len()];
            self.host.evaluate(&self.data, i, &self.names, &mut values)?;
            out.push(RangeValues { name, values });
        }
        Ok(out)
    }
}

impl Drop for RangeProfiler {
    fn drop(&mut self) {
        if self.started {
            let mut sp = RangeStop::new();
            sp.object = self.object;
            let _ = call(c"cuptiRangeProfilerStop", &mut sp);
        }
        let mut d = RangeObject::new();
        d.object = self.object;
        let _ = call(c"cuptiRangeProfilerDisable", &mut d);
    }
}

/// One PM sample: GPU start/end timestamps (CUPTI's clock) and one value per metric.
#[derive(Debug, Clone, PartialEq)]
pub struct PmSample {
    pub start_ns: u64,
    pub end_ns: u64,
    pub values: Vec<f64>,
}

/// PM sampling on one device.
pub struct PmSampler {
    object: *mut c_void,
    host: Host,
    names: Names,
    /// The configuration image given to `cuptiPmSamplingSetConfig` (kept: CUPTI may read it at
    /// start).
    _config: Vec<u8>,
    data: Vec<u8>,
    /// Samples of the current counter data image already returned.
    taken: usize,
    started: bool,
}

// SAFETY: as for `RangeProfiler`.
unsafe impl Send for PmSampler {}

impl std::fmt::Debug for PmSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmSampler").field("metrics", &self.names.ptrs.len()).finish()
    }
}

impl PmSampler {
    /// Enables PM sampling on CUDA device `device_index` for `metrics` (they must fit one pass),
    /// sampling every `interval_ns` of GPU time, keeping up to `max_samples` between decodes.
    pub fn new(
        device_index: usize,
        metrics: &[String],
        interval_ns: u64,
        max_samples: u32,
    ) -> Result<Self, MetricsError> {
        profiler_init()?;
        let mut en = PmEnable::new();
        en.device_index = device_index;
        call(c"cuptiPmSamplingEnable", &mut en)?;
        let object = en.object;
        let build = || -> Result<(Host, Names, Vec<u8>, Vec<u8>), MetricsError> {
            let chip = chip_name(device_index)?;
            let mut av = PmAvailability::new();
            av.device_index = device_index;
            call(c"cuptiPmSamplingGetCounterAvailability", &mut av)?;
            let mut availability = vec![0u8; av.image_size];
            av.image = availability.as_mut_ptr();
            call(c"cuptiPmSamplingGetCounterAvailability", &mut av)?;
            let host = Host::new(PROFILER_TYPE_PM_SAMPLING, chip, availability)?;
            let names = Names::new(metrics)?;
            let (config, passes) = host.config(&names)?;
            if passes > 1 {
                set_error(c"offtrace PM sampling", 0, &format!("{passes} passes: the metrics must fit one"));
                return Err(MetricsError::InvalidArgument);
            }
            let mut sc = PmSetConfig::new();
            sc.object = object;
            sc.config_size = config.len();
            sc.config = config.as_ptr();
            sc.hardware_buffer_size = 64 << 20;
            sc.interval = interval_ns;
            sc.trigger = TRIGGER_GPU_TIME_INTERVAL;
            sc.append = APPEND_KEEP_OLDEST;
            call(c"cuptiPmSamplingSetConfig", &mut sc)?;
            let mut ds = PmDataSize::new();
            ds.object = object;
            ds.names = names.ptrs.as_ptr();
            ds.count = names.ptrs.len();
            ds.max_samples = max_samples;
            call(c"cuptiPmSamplingGetCounterDataSize", &mut ds)?;
            Ok((host, names, config, vec![0u8; ds.size]))
        };
        match build() {
            Ok((host, names, config, data)) => {
                let mut s = Self { object, host, names, _config: config, data, taken: 0, started: false };
                s.reset_data()?;
                Ok(s)
            }
            Err(e) => {
                let mut d = PmObject::new();
                d.object = object;
                let _ = call(c"cuptiPmSamplingDisable", &mut d);
                Err(e)
            }
        }
    }

    fn reset_data(&mut self) -> Result<(), MetricsError> {
        let mut init = DataInitialize::new();
        init.object = self.object;
        init.size = self.data.len();
        init.data = self.data.as_mut_ptr();
        self.taken = 0;
        call(c"cuptiPmSamplingCounterDataImageInitialize", &mut init)
    }

    pub fn start(&mut self) -> Result<(), MetricsError> {
        let mut p = PmObject::new();
        p.object = self.object;
        call(c"cuptiPmSamplingStart", &mut p)?;
        self.started = true;
        Ok(())
    }

    pub fn stop(&mut self) -> Result<(), MetricsError> {
        if !self.started {
            return Ok(());
        }
        self.started = false;
        let mut p = PmObject::new();
        p.object = self.object;
        call(c"cuptiPmSamplingStop", &mut p)
    }

    /// Decodes what the hardware collected since the last call into `out` (appended); returns
    /// whether the hardware buffer overflowed.
    pub fn decode(&mut self, out: &mut Vec<PmSample>) -> Result<bool, MetricsError> {
        let mut overflow = false;
        loop {
            let mut dec = PmDecode::new();
            dec.object = self.object;
            dec.data = self.data.as_mut_ptr();
            dec.size = self.data.len();
            call(c"cuptiPmSamplingDecodeData", &mut dec)?;
            overflow |= dec.overflow != 0;
            let mut info = PmDataInfo::new();
            info.data = self.data.as_ptr();
            info.size = self.data.len();
            call(c"cuptiPmSamplingGetCounterDataInfo", &mut info)?;
            for i in self.taken..info.completed {
                let mut si = PmSampleInfo::new();
                si.object = self.object;
                si.data = self.data.as_ptr();
                si.size = self.data.len();
                si.index = i;
                call(c"cuptiPmSamplingCounterDataGetSampleInfo", &mut si)?;
                let mut values = vec![0f64; self.names.ptrs.len()];
                self.host.evaluate(&self.data, i, &self.names, &mut values)?;
                out.push(PmSample { start_ns: si.start, end_ns: si.end, values });
            }
            self.taken = info.completed;
            // CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL (1): the image is full and
            // more is waiting in the hardware buffer: start a fresh image and decode on.
            if dec.stop_reason == 1 || info.completed >= info.total {
                self.reset_data()?;
                if dec.stop_reason == 1 {
                    continue;
                }
            }
            return Ok(overflow);
        }
    }
}

impl Drop for PmSampler {
    fn drop(&mut self) {
        let _ = self.stop();
        let mut d = PmObject::new();
        d.object = self.object;
        let _ = call(c"cuptiPmSamplingDisable", &mut d);
    }
}

/// Which clock PM sample timestamps turned out to be on (see [`PmClock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmClockDomain {
    /// Already the trace clock: CUPTI's timestamps follow the timestamp callback the CUDA
    /// backend registers (`cuptiActivityRegisterTimestampCallback`).
    Trace,
    /// `cuptiGetTimestamp`'s clock: shifted by (trace now − CUPTI now), read back to back.
    Cupti,
    /// CLOCK_REALTIME (the GPU's global timer, which the driver keeps on the host's wall clock):
    /// shifted by (trace now − realtime now).
    Realtime,
    /// None of those within [`PmClock::WINDOW_NS`]: the least (decode time − last sample end)
    /// seen so far, i.e. a sample is taken to have ended no later than its earliest decode.
    Anchored,
}

/// Maps PM sample timestamps onto the trace clock. `cupti_pmsampling.h` only says a sample's
/// start/end are timestamps in ns; which clock depends on CUPTI and on whether a timestamp
/// callback is registered. At each decode, the candidates are tried in order and the first one
/// that puts the newest sample's end within [`Self::WINDOW_NS`] before the decode (and not after
/// it by more than [`Self::SLACK_NS`]) is kept for the rest of the run.
#[derive(Debug, Clone, Default)]
pub struct PmClock {
    domain: Option<PmClockDomain>,
    /// `Anchored`: the least (trace now − sample end) seen, as a wrapping i64.
    anchor: Option<i64>,
}

/// The clocks read at one decode, besides the samples' own (ns).
#[derive(Debug, Clone, Copy)]
pub struct ClockReading {
    pub trace_now: u64,
    pub cupti_now: Option<u64>,
    pub realtime_now: u64,
}

impl ClockReading {
    /// The clocks now: the trace clock (`offtrace_core::timestamp_ns`, what the recorder
    /// stamps), CUPTI's and CLOCK_REALTIME, the trace clock read on both sides of the others.
    pub fn now() -> Self {
        let a = offtrace_core::timestamp_ns();
        let cupti_now = gpu_timestamp();
        let realtime_now = offtrace_core::clock::realtime_ns();
        let b = offtrace_core::timestamp_ns();
        Self { trace_now: a + (b.saturating_sub(a)) / 2, cupti_now, realtime_now }
    }
}

impl PmClock {
    /// How far before a decode the newest sample's end may be on a matching clock.
    pub const WINDOW_NS: u64 = 2_000_000_000;
    /// How far after a decode it may be (the clocks are read a little apart).
    pub const SLACK_NS: u64 = 1_000_000;

    pub fn domain(&self) -> Option<PmClockDomain> {
        self.domain
    }

    /// The offset (added, wrapping) that maps this decode's samples onto the trace clock, given
    /// the newest sample's end `last_end`.
    pub fn offset(&mut self, last_end: u64, r: &ClockReading) -> i64 {
        let diff = |to: u64, from: u64| to.wrapping_sub(from) as i64;
        let cand = |d: PmClockDomain| -> Option<i64> {
            match d {
                PmClockDomain::Trace => Some(0),
                PmClockDomain::Cupti => r.cupti_now.map(|c| diff(r.trace_now, c)),
                PmClockDomain::Realtime => Some(diff(r.trace_now, r.realtime_now)),
                PmClockDomain::Anchored => None,
            }
        };
        if self.domain.is_none() {
            let fits = |off: i64| {
                let end = last_end.wrapping_add(off as u64);
                let lag = diff(r.trace_now, end);
                lag >= -(Self::SLACK_NS as i64) && lag <= Self::WINDOW_NS as i64
            };
            self.domain = [PmClockDomain::Trace, PmClockDomain::Cupti, PmClockDomain::Realtime]
                .into_iter()
                .find(|&d| cand(d).is_some_and(fits))
                .or(Some(PmClockDomain::Anchored));
        }
        match self.domain.and_then(cand) {
            Some(off) => off,
            None => {
                let lag = diff(r.trace_now, last_end);
                let a = self.anchor.map_or(lag, |a| a.min(lag));
                self.anchor = Some(a);
                a
            }
        }
    }

    /// `t` (a sample's timestamp) on the trace clock under `offset`.
    pub fn map(t: u64, offset: i64) -> u64 {
        t.wrapping_add(offset as u64)
    }
}

/// The metrics of the `cupti.range_profiler` group (name, description, unit).
pub const RANGE_METRICS: [(&str, &str, &str); 4] = [
    ("gpu__time_duration.sum", "kernel duration", "ns"),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM throughput, % of peak", "%"),
    ("dram__bytes.sum", "DRAM bytes read and written", "bytes"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy (active warps, % of peak)", "%"),
];

/// The metrics of the `cupti.pm_sampling` group (one pass on GH100: see docs/metrics.md).
pub const PM_METRICS: [(&str, &str, &str); 2] = [
    ("gr__cycles_active.avg.pct_of_peak_sustained_elapsed", "graphics/compute engine busy, % of elapsed cycles", "%"),
    ("sm__cycles_active.avg.pct_of_peak_sustained_elapsed", "SM busy (average over SMs), % of elapsed cycles", "%"),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// `CUPTI_PROFILER_STRUCT_SIZE` of the CUDA 13.0 headers (x86-64), computed by hand from
    /// their field lists: offset of the last field plus its size.
    #[test]
    fn struct_sizes_match_the_headers() {
        assert_eq!(ProfilerInitialize::new().struct_size, 16);
        assert_eq!(DeviceGetChipName::new().struct_size, 32);
        assert_eq!(GetCounterAvailability::new().struct_size, 40);
        assert_eq!(RangeEnable::new().struct_size, 32);
        assert_eq!(RangeObject::new().struct_size, 24);
        // profilerType (u32) at 16, padded: chip at 24, availability 32, host 40.
        assert_eq!(HostInitialize::new().struct_size, 48);
        assert_eq!(HostAddMetrics::new().struct_size, 40);
        assert_eq!(HostConfigImage::new().struct_size, 40);
        assert_eq!(HostPasses::new().struct_size, 40);
        // ... maxNumOfRanges 40, maxNumRangeTreeNodes (u32) 48, counterDataSize 56.
        assert_eq!(RangeDataSize::new().struct_size, 64);
        // range 56, replay 60, maxRangesPerPass 64, levels 72/74, passIndex 80, target (u16) 88.
        assert_eq!(RangeSetConfig::new().struct_size, 90);
        // passIndex 24, targetNestingLevel 32, isAllPassSubmitted (u8) 40.
        assert_eq!(RangeStop::new().struct_size, 41);
        assert_eq!(RangeDataInfo::new().struct_size, 40);
        assert_eq!(HostRangeName::new().struct_size, 56);
        assert_eq!(HostEvaluate::new().struct_size, 72);
        // samplingInterval 48, triggerMode 56, hwBufferAppendMode 60.
        assert_eq!(PmSetConfig::new().struct_size, 64);
        // maxSamples (u32) 40, counterDataSize 48.
        assert_eq!(PmDataSize::new().struct_size, 56);
        // decodeStopReason (u32) 40, overflow (u8) 44.
        assert_eq!(PmDecode::new().struct_size, 45);
        assert_eq!(PmDataInfo::new().struct_size, 56);
        assert_eq!(PmSampleInfo::new().struct_size, 64);
    }

    fn reading(trace_now: u64, cupti_now: Option<u64>, realtime_now: u64) -> ClockReading {
        ClockReading { trace_now, cupti_now, realtime_now }
    }

    #[test]
    fn pm_samples_on_the_trace_clock_stay_put() {
        let mut c = PmClock::default();
        // The newest sample ended 0.4 ms before the decode, on the trace clock.
        let off = c.offset(10_000_000_000 - 400_000, &reading(10_000_000_000, Some(77), 1_700_000_000_000_000_000));
        assert_eq!((off, c.domain()), (0, Some(PmClockDomain::Trace)));
        assert_eq!(PmClock::map(9_999_000_000, off), 9_999_000_000);
    }

    #[test]
    fn pm_samples_on_cuptis_clock_are_shifted() {
        let mut c = PmClock::default();
        let r = reading(10_000_000_000, Some(500_000_000_000), 1_700_000_000_000_000_000);
        let off = c.offset(500_000_000_000 - 700_000, &r);
        assert_eq!(c.domain(), Some(PmClockDomain::Cupti));
        assert_eq!(PmClock::map(500_000_000_000 - 700_000, off), 10_000_000_000 - 700_000);
        // Kept for the run, re-measured at each decode: a later decode 1 ms on.
        let r2 = reading(10_001_000_000, Some(500_001_000_000 + 3), 1);
        let off2 = c.offset(5, &r2);
        assert_eq!((PmClock::map(500_000_999_000, off2), c.domain()), (10_000_998_997, Some(PmClockDomain::Cupti)));
    }

    #[test]
    fn pm_samples_on_the_wall_clock_are_shifted() {
        let mut c = PmClock::default();
        let rt = 1_700_000_000_000_000_000u64;
        let off = c.offset(rt - 2_000_000, &reading(10_000_000_000, None, rt));
        assert_eq!(c.domain(), Some(PmClockDomain::Realtime));
        assert_eq!(PmClock::map(rt - 2_000_000, off), 9_998_000_000);
    }

    #[test]
    fn pm_samples_on_an_unknown_clock_are_anchored_at_the_least_lag() {
        let mut c = PmClock::default();
        // Neither trace, CUPTI nor wall clock: the first decode anchors end = decode time...
        let off = c.offset(123_000_000, &reading(10_000_000_000, Some(1), 2));
        assert_eq!((c.domain(), PmClock::map(123_000_000, off)), (Some(PmClockDomain::Anchored), 10_000_000_000));
        // ... a later decode with less lag moves the anchor; more lag does not.
        let off = c.offset(124_000_000, &reading(10_000_900_000, Some(1), 2));
        assert_eq!(PmClock::map(124_000_000, off), 10_000_900_000);
        let off = c.offset(125_000_000, &reading(10_002_500_000, Some(1), 2));
        assert_eq!(PmClock::map(125_000_000, off), 10_001_900_000);
    }

    #[test]
    fn absent_cupti_fails_cleanly() {
        if available() {
            return; // a machine with CUDA: the GPU runs check the real thing
        }
        assert!(RangeProfiler::new(std::ptr::null_mut(), 0, &["x".into()], 4).is_err());
        assert!(PmSampler::new(0, &["x".into()], 1_000_000, 4).is_err());
        assert!(current_context().is_null());
    }
}
