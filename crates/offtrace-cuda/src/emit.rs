//! The one place where the CUDA backend talks to the tracing services (`offtrace-core`): API
//! calls as enter/exit of the two CUDA API kinds, device records as activity, allocations,
//! launches, modules and graph structure as instant records.
//!
//! | CUPTI | services |
//! |---|---|
//! | runtime / driver API callback enter, exit | `CUDA_RUNTIME_API` / `CUDA_DRIVER_API` ENTER / EXIT, operation = callback id, arguments from the parameter struct, result at exit |
//! | `CONCURRENT_KERNEL` | `KERNEL_DISPATCH` activity (device start/end, stream as queue, grid × block) |
//! | `MEMCPY`, `MEMCPY2` (peer) | `MEMORY_COPY` activity (bytes) |
//! | `MEMSET` | `MEMORY_FILL` activity (value, bytes) |
//! | `SYNCHRONIZATION` | `SYNC` activity (wait for events, barrier for stream/context synchronisation) |
//! | `MARKER` (NVTX) | `MARKER` activity (mark, or range start/end by id) |
//! | `GRAPH_TRACE` | `TASK_GRAPH` task activity (one graph launch; node = graph id) |
//! | kernel, copy, memset with a graph node id | also a `TASK_GRAPH` task activity of that node (the node ran as that command: same correlation, queue, device times) |
//! | resource: module loaded / unloading | `CODE_OBJECT` program LOAD / UNLOAD (module id, cubin size, named by its kernels: `cubin.rs`) |
//! | resource: graph node created, dependency created | `TASK_GRAPH` node_create / edge_create (CUPTI's graph node ids, the ids kernel records carry) |
//! | driver/runtime allocation and free calls | `MEMORY_ALLOC` alloc / free + the live allocation table |
//! | launch calls | `KERNEL_DISPATCH` launch instant with the kernel's pointer-sized parameters (kernel allocation properties) |
//!
//! Device records carry the correlation id of the API call that caused them (`corr`, 0 when
//! the call was not traced).

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_void};
use std::sync::{Mutex, OnceLock};

use offtrace_core::{
    ApiCallPayload, ArgDescriptor, ArgFormat, CallToken, CodeObjectPayload, CopyDirection, DevicePayload, DeviceType,
    KernelDispatchPayload, Kind, MAX_ARGS, MemoryAllocPayload, MemoryCopyPayload, MemoryFillPayload, MemoryType,
    Operation, Payload, Phase, QueuePayload, SyncPayload, TaskGraphPayload, code_object, device_op, emit_activity,
    emit_enter_with, emit_exit, emit_exit_at, emit_instant, emit_instant_at, kernel_dispatch, kind_enabled, marker_op,
    memory_copy, memory_fill, queue_op, register_kind_operations, sync_op, task_graph,
};

use crate::activity::{Activity, CopyKind, MarkerActivity, SyncKind};
use crate::generated::cupti_layout as l;
use crate::injection::Injection;
use crate::table::{self, ApiDomain, ApiFunction, ParamFormat};

/// The core's operation table of an API domain: every callback id with its name and
/// parameters (built once, leaked: it lives for the process).
pub fn operations(domain: ApiDomain) -> &'static [Operation] {
    static TABLES: [OnceLock<&'static [Operation]>; 2] = [OnceLock::new(), OnceLock::new()];
    TABLES[domain as usize].get_or_init(|| {
        let ops: Vec<Operation> = domain
            .functions()
            .iter()
            .map(|f| Operation {
                id: f.id,
                name: f.name,
                args: Box::leak(
                    f.params
                        .iter()
                        .take(offtrace_core::MAX_ARGS)
                        .map(|p| ArgDescriptor {
                            name: p.name,
                            type_name: p.c_type,
                            size: p.size.min(8) as u8,
                            format: match p.format {
                                ParamFormat::Unsigned => ArgFormat::Unsigned,
                                ParamFormat::Signed => ArgFormat::Signed,
                                ParamFormat::Hex => ArgFormat::Hex,
                                ParamFormat::Pointer => ArgFormat::Pointer,
                                ParamFormat::Bool => ArgFormat::Bool,
                                ParamFormat::CString => ArgFormat::CString,
                                ParamFormat::Enum => ArgFormat::Enum,
                            },
                        })
                        .collect::<Vec<_>>()
                        .into_boxed_slice(),
                ),
            })
            .collect();
        Box::leak(ops.into_boxed_slice())
    })
}

/// Registers the two API kinds' tables with the services (once; before tools configure
/// filters). A second registration (another copy of the backend) is refused and harmless.
pub fn register_api_tables() {
    for d in [ApiDomain::Runtime, ApiDomain::Driver] {
        let _ = register_kind_operations(api_kind(d), operations(d));
    }
}

/// An API call whose enter was delivered; its exit is owed on the same thread.
#[derive(Debug)]
pub struct OpenCall {
    domain: ApiDomain,
    cbid: u32,
    token: CallToken,
}

impl OpenCall {
    pub fn correlation(&self) -> u64 {
        self.token.correlation_id()
    }
    pub fn matches(&self, domain: ApiDomain, cbid: u32) -> bool {
        self.domain == domain && self.cbid == cbid
    }
}

/// The services' kind of an API domain.
pub fn api_kind(domain: ApiDomain) -> Kind {
    match domain {
        ApiDomain::Runtime => Kind::CudaRuntimeApi,
        ApiDomain::Driver => Kind::CudaDriverApi,
    }
}

/// The call's arguments as the services carry them, read straight into the payload.
///
/// # Safety
/// `params` is null or `f`'s CUPTI parameter struct.
#[inline]
pub unsafe fn call_payload(f: &ApiFunction, params: *const u8) -> ApiCallPayload {
    let mut p = ApiCallPayload { function_id: f.id, arg_count: 0, result: 0, has_result: 0, args: [0; MAX_ARGS] };
    // SAFETY: per the caller.
    p.arg_count = unsafe { table::read_args(f, params, &mut p.args) } as u32;
    p
}

/// Enter of an API call; `None` when no context wants the kind. The arguments are read only
/// for a consumer of the enter's payload: the recorder on the services' direct path records a
/// call once, at its exit, and reads nothing here.
///
/// # Safety
/// `params` is null or `f`'s CUPTI parameter struct, valid during the call.
pub unsafe fn api_enter(domain: ApiDomain, f: &ApiFunction, params: *const u8) -> Option<OpenCall> {
    let kind = api_kind(domain);
    if !kind_enabled(kind) {
        return None;
    }
    // SAFETY: per the caller (the builder runs during the callback, if at all).
    let token = emit_enter_with(kind, f.id, || unsafe { call_payload(f, params) }, |p| Payload::api(kind, p));
    if !token.is_delivered() {
        emit_exit(token, Payload::None);
        return None;
    }
    Some(OpenCall { domain, cbid: f.id, token })
}

/// Exit of an API call entered with [`api_enter`]: the arguments again (out-parameters are
/// pointers: their values are what the call wrote through), and the result.
///
/// # Safety
/// As for [`api_enter`].
pub unsafe fn api_exit(call: OpenCall, f: &ApiFunction, params: *const u8, result: i32) {
    // SAFETY: per the caller.
    let mut p = unsafe { call_payload(f, params) };
    api_exit_at(call, &mut p, result, 0);
}

/// [`api_exit`] with the arguments already read at the exit ([`call_payload`]; an allocation
/// or launch record reads the same ones), at `ts` ([`offtrace_core::timestamp_ns`]; 0 = now):
/// the time a launch record made at this exit carries too, one clock reading for both.
#[inline]
pub fn api_exit_at(call: OpenCall, p: &mut ApiCallPayload, result: i32, ts: u64) {
    let kind = api_kind(call.domain);
    p.result = result;
    p.has_result = 1;
    emit_exit_at(call.token, ts, Payload::api(kind, p));
}

/// The kind and operation definitions of an API call this backend writes into the trace itself
/// (a driver-only launch, `Injection::driver_launch`): the same ones the recorder writes before
/// the first call of an operation it records (a reader takes a repeated definition as the same).
pub fn operation_definitions(
    domain: ApiDomain,
    cbid: u32,
    mut string: impl FnMut(&[u8]) -> offtrace_format::StrId,
) -> [offtrace_format::Record; 2] {
    use offtrace_format::{ArgDef, OperationDef, Record};
    let kind = api_kind(domain);
    let kind_def = Record::KindDef { kind: kind as u32, name: string(kind.name().as_bytes()) };
    let def = match kind.operation(cbid) {
        Some(o) => OperationDef {
            kind: kind as u32,
            op: cbid,
            name: string(o.name.as_bytes()),
            args: o
                .args
                .iter()
                .map(|a| ArgDef {
                    name: string(a.name.as_bytes()),
                    type_name: string(a.type_name.as_bytes()),
                    size: a.size,
                    format: a.format as u8,
                })
                .collect(),
        },
        None => {
            OperationDef { kind: kind as u32, op: cbid, name: string(format!("op{cbid}").as_bytes()), args: Vec::new() }
        }
    };
    [kind_def, Record::OperationDef(def)]
}

/// The device id of a CUDA device ordinal (0 stays "unknown").
pub fn device_id(ordinal: u32) -> u64 {
    u64::from(ordinal) + 1
}

/// The queue id of a CUPTI stream: context id in the high half, stream id in the low half
/// (CUPTI numbers streams per context).
pub fn queue_id(context: u32, stream: u32) -> u64 {
    (u64::from(context) << 32) | u64::from(stream)
}

/// An allocation of `device` ([`device_id`]; 0 for host memory or when unknown).
pub fn memory_alloc(ptr: u64, size: u64, memory_type: MemoryType, device: u64) {
    offtrace_core::emit_memory_alloc(&MemoryAllocPayload { ptr, size, memory_type, device });
}

pub fn memory_free(ptr: u64) {
    if ptr != 0 {
        offtrace_core::emit_memory_free(ptr);
    }
}

/// Whether a context wants launches (their kernel arguments are read only then).
pub fn dispatch_wanted() -> bool {
    kind_enabled(Kind::KernelDispatch)
}

/// A kernel launch inside the launching call (its correlation id) on the queue of its stream,
/// with the kernel's demangled name, geometry and pointer-sized parameter values (for
/// allocation properties), at `ts` ([`offtrace_core::timestamp_ns`]; 0 = now).
pub fn kernel_dispatch(
    queue: u64,
    function: u64,
    name: *const c_char,
    grid: [u64; 3],
    block: [u64; 3],
    args: &[u64],
    ts: u64,
) {
    let mut p = KernelDispatchPayload { queue, kernel: function, kernel_name: name, work_dim: 3, ..Default::default() };
    for i in 0..3 {
        p.local_size[i] = block[i];
        p.global_size[i] = grid[i] * block[i];
    }
    let n = args.len().min(p.kernel_args.len());
    p.kernel_args[..n].copy_from_slice(&args[..n]);
    p.kernel_arg_count = n as u32;
    emit_instant_at(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, ts, Payload::KernelDispatch(&p));
}

/// The name of a module's code-object record: its kernel when it holds one (demangled); when it
/// holds several, the one with the shortest mangled name (the first of those in table order) and
/// how many more, `cuda_module` when its cubin names none (`cubin::kernel_names`). The shortest:
/// PyTorch's modules hold hundreds of template instances whose first can demangle to a
/// thousand characters, a line no report can show, while each module also holds short ones;
/// only the chosen one is demangled (at module load, in the program's thread).
pub fn module_name(kernels: &[&[u8]]) -> CString {
    let shortest = kernels.iter().min_by_key(|k| k.len());
    let Some(first) = shortest.and_then(|k| CString::new(*k).ok()) else {
        return c"cuda_module".to_owned();
    };
    let first = demangle(&first);
    if kernels.len() == 1 {
        return first;
    }
    let mut s = first.into_bytes();
    let more = kernels.len() - 1;
    s.extend_from_slice(format!(" (+{more} kernel{})", if more == 1 { "" } else { "s" }).as_bytes());
    CString::new(s).unwrap_or_else(|_| c"cuda_module".to_owned())
}

/// A module loaded or about to be unloaded, named by [`module_name`].
pub fn module(id: u32, cubin_size: u64, name: &CStr, loaded: bool) {
    let p = CodeObjectPayload { handle: u64::from(id), program: 0, name: name.as_ptr(), binary_size: cubin_size };
    let phase = if loaded { Phase::Load } else { Phase::Unload };
    emit_instant(Kind::CodeObject, code_object::PROGRAM, phase, Payload::CodeObject(&p));
}

/// A stream (queue) created or destroyed.
pub fn stream(context: u32, stream: u32, device: u32, created: bool) {
    let p = QueuePayload {
        queue: queue_id(context, stream),
        device: device_id(device),
        context: u64::from(context),
        flags: 1,
    };
    let op = if created { queue_op::CREATE } else { queue_op::DESTROY };
    emit_instant(Kind::Queue, op, Phase::None, Payload::Queue(&p));
}

/// A device, once, when the backend first sees it.
pub fn device(ordinal: u32, name: &CStr) {
    let p = DevicePayload { handle: device_id(ordinal), parent: 0, name: name.as_ptr(), device_type: DeviceType::Gpu };
    emit_instant(Kind::Device, device_op::DEVICE, Phase::None, Payload::Device(&p));
}

/// A graph node: `node` is CUPTI's graph node id (what kernel, copy and fill records carry as
/// their graph node), `source` the graph id.
pub fn graph_node(graph: u32, node: u64, node_type: u32) {
    let name = graph_node_type_name(node_type);
    let p = TaskGraphPayload { node, source: u64::from(graph), name: name.as_ptr(), ..Default::default() };
    emit_instant(Kind::TaskGraph, task_graph::NODE_CREATE, Phase::None, Payload::TaskGraph(&p));
}

pub(crate) fn graph_node_type_name(t: u32) -> &'static CStr {
    match i64::from(t) {
        l::CU_GRAPH_NODE_TYPE_KERNEL => c"kernel",
        l::CU_GRAPH_NODE_TYPE_MEMCPY => c"memcpy",
        l::CU_GRAPH_NODE_TYPE_MEMSET => c"memset",
        l::CU_GRAPH_NODE_TYPE_HOST => c"host",
        l::CU_GRAPH_NODE_TYPE_GRAPH => c"graph",
        l::CU_GRAPH_NODE_TYPE_EMPTY => c"empty",
        // A node first seen as an edge's end (injection::GraphNodes).
        0xffff_ffff => c"node",
        _ => c"other",
    }
}

/// A dependency `from` → `to` between two nodes of graph `graph`.
pub fn graph_edge(graph: u32, from: u64, to: u64) {
    let p = TaskGraphPayload { node: u64::from(graph), source: from, target: to, ..Default::default() };
    emit_instant(Kind::TaskGraph, task_graph::EDGE_CREATE, Phase::None, Payload::TaskGraph(&p));
}

/// Demangled kernel names, by CUPTI's name pointer (CUPTI keeps one string per function):
/// [`demangle`], cached. Used on CUPTI's buffer thread only (and at launches). The result lives
/// for the process.
///
/// # Safety
/// `name` is null or a NUL-terminated string that stays valid and unchanged for the process
/// (CUPTI's and the driver's kernel names do).
pub unsafe fn demangled(name: *const c_char) -> *const c_char {
    static CACHE: OnceLock<Mutex<HashMap<usize, CString>>> = OnceLock::new();
    if name.is_null() {
        return name;
    }
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = c.get(&(name as usize)) {
        return s.as_ptr();
    }
    // SAFETY: name is CUPTI's NUL-terminated kernel name.
    let text = demangle(unsafe { CStr::from_ptr(name) });
    let ptr = text.as_ptr();
    c.insert(name as usize, text);
    ptr
}

/// `mangled` demangled by `__cxa_demangle` of the process's C++ runtime (the demangler
/// torch.profiler uses, so names compare equal); unchanged when it is not a C++ name or the
/// runtime has no demangler.
pub fn demangle(mangled: &CStr) -> CString {
    type Demangle = unsafe extern "C" fn(*const c_char, *mut c_char, *mut usize, *mut i32) -> *mut c_char;
    static DEMANGLE: OnceLock<Option<Demangle>> = OnceLock::new();
    let f = *DEMANGLE.get_or_init(|| {
        // The program's C++ runtime may be loaded RTLD_LOCAL (Python extensions): open it by
        // name (it is on every system CUDA runs on), falling back to the global scope.
        // SAFETY: dlopen/dlsym with NUL-terminated names; the handle stays open.
        let p = unsafe {
            let h = libc::dlopen(c"libstdc++.so.6".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            let p = if h.is_null() { std::ptr::null_mut() } else { libc::dlsym(h, c"__cxa_demangle".as_ptr()) };
            if p.is_null() { libc::dlsym(libc::RTLD_DEFAULT, c"__cxa_demangle".as_ptr()) } else { p }
        };
        // SAFETY: __cxa_demangle has this C signature (the Itanium C++ ABI).
        (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, Demangle>(p) })
    });
    match f {
        Some(f) if mangled.to_bytes().starts_with(b"_Z") => {
            let mut status = 0i32;
            // SAFETY: a NUL-terminated input; null buffer: __cxa_demangle mallocs the result.
            let out = unsafe { f(mangled.as_ptr(), std::ptr::null_mut(), std::ptr::null_mut(), &mut status) };
            if status == 0 && !out.is_null() {
                // SAFETY: a malloc'ed NUL-terminated string, freed after the copy.
                let s = unsafe { CStr::from_ptr(out) }.to_owned();
                // SAFETY: allocated by __cxa_demangle with malloc, not used after.
                unsafe { libc::free(out.cast()) };
                s
            } else {
                mangled.to_owned()
            }
        }
        _ => mangled.to_owned(),
    }
}

/// CUPTI's lost records and its own overhead, into the trace's accounting (at the end).
pub fn finish(inj: &Injection) {
    use std::sync::atomic::Ordering::Relaxed;
    let Some(defs) = offtrace_recorder::definitions() else { return };
    let s = &inj.stats;
    let dropped = s.dropped.load(Relaxed);
    if dropped > 0 {
        // tid 0: lost inside CUPTI, not on a thread of the program.
        defs.push(offtrace_format::Record::Drops { tid: 0, count: dropped });
    }
    for (key, value) in [
        ("cuda.cupti_dropped_records", dropped),
        ("cuda.cupti_overhead_ns", s.cupti_overhead_ns.load(Relaxed)),
        ("cuda.buffer_processing_ns", s.processing_ns.load(Relaxed)),
        ("cuda.activity_records", s.records.load(Relaxed)),
        ("cuda.runtime_calls", s.api_calls[0].load(Relaxed)),
        ("cuda.driver_calls", s.api_calls[1].load(Relaxed)),
        ("cuda.unpaired_device_records", s.unpaired_device_records.load(Relaxed)),
        ("cuda.driver_only_launches", s.driver_only_launches.load(Relaxed)),
        ("cuda.captured_launches", s.captured_launches.load(Relaxed)),
    ] {
        defs.push(offtrace_format::Record::Info { key: key.into(), value: value.to_string() });
    }
}

fn copy_direction(k: CopyKind) -> CopyDirection {
    match k {
        CopyKind::HostToDevice | CopyKind::HostToArray => CopyDirection::HostToDevice,
        CopyKind::DeviceToHost | CopyKind::ArrayToHost => CopyDirection::DeviceToHost,
        CopyKind::DeviceToDevice
        | CopyKind::ArrayToArray
        | CopyKind::ArrayToDevice
        | CopyKind::DeviceToArray
        | CopyKind::PeerToPeer => CopyDirection::DeviceToDevice,
        CopyKind::HostToHost => CopyDirection::HostToHost,
        CopyKind::Unknown => CopyDirection::Unknown,
    }
}

/// CUPTI's `CUpti_ActivityMemcpyKind` value of a copy kind (what the copy's name is made of).
fn copy_kind_value(k: CopyKind) -> u32 {
    let v = match k {
        CopyKind::Unknown => 0,
        CopyKind::HostToDevice => l::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
        CopyKind::DeviceToHost => l::CUPTI_ACTIVITY_MEMCPY_KIND_DTOH,
        CopyKind::HostToArray => l::CUPTI_ACTIVITY_MEMCPY_KIND_HTOA,
        CopyKind::ArrayToHost => l::CUPTI_ACTIVITY_MEMCPY_KIND_ATOH,
        CopyKind::ArrayToArray => l::CUPTI_ACTIVITY_MEMCPY_KIND_ATOA,
        CopyKind::ArrayToDevice => l::CUPTI_ACTIVITY_MEMCPY_KIND_ATOD,
        CopyKind::DeviceToArray => l::CUPTI_ACTIVITY_MEMCPY_KIND_DTOA,
        CopyKind::DeviceToDevice => l::CUPTI_ACTIVITY_MEMCPY_KIND_DTOD,
        CopyKind::HostToHost => l::CUPTI_ACTIVITY_MEMCPY_KIND_HTOH,
        CopyKind::PeerToPeer => l::CUPTI_ACTIVITY_MEMCPY_KIND_PTOP,
    };
    v as u32
}

fn memory_type(cupti_kind: u32) -> MemoryType {
    match i64::from(cupti_kind) {
        l::CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE | l::CUPTI_ACTIVITY_MEMORY_KIND_PINNED => MemoryType::Host,
        l::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE
        | l::CUPTI_ACTIVITY_MEMORY_KIND_ARRAY
        | l::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC => MemoryType::Device,
        l::CUPTI_ACTIVITY_MEMORY_KIND_MANAGED | l::CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC => MemoryType::Shared,
        _ => MemoryType::Unknown,
    }
}

/// One device record, on CUPTI's buffer thread, with the correlation id of the call that
/// caused it. A kernel, copy or memset that a CUDA graph node produced is also that node's
/// task ([`graph_node_ran`]).
pub fn activity(a: &Activity, corr: u64) {
    device_record(a, corr);
    let (node, graph, place, start, end) = match a {
        Activity::Kernel(k) => (k.graph_node, k.graph, k.place, k.start, k.end),
        Activity::Copy(c) => (c.graph_node, c.graph, c.place, c.start, c.end),
        Activity::Set(s) => (s.graph_node, s.graph, s.place, s.start, s.end),
        _ => return,
    };
    if node != 0 {
        let name = match a {
            // SAFETY: CUPTI's kernel names live for the process.
            Activity::Kernel(k) => unsafe { demangled(k.name) },
            _ => std::ptr::null(),
        };
        graph_node_ran(node, graph, queue_id(place.context, place.stream), name, corr, start, end);
    }
}

/// Links graph node `node` (CUPTI's id, as in its `node_create` record) to the device command
/// it produced in one launch of its graph: a `TASK_GRAPH` task activity naming the node, with
/// the command's correlation (the graph launch's), queue and device times, so a reader joins
/// the node to the kernel, copy or fill record of the same correlation, queue and times, and
/// counts the node as a real command. `source` is the graph id, as on the node; `name` the
/// kernel's name (null for a copy or fill: the node's type names it).
pub fn graph_node_ran(node: u64, graph: u32, queue: u64, name: *const c_char, corr: u64, start: u64, end: u64) {
    let p = TaskGraphPayload { node, source: u64::from(graph), queue, name, ..Default::default() };
    emit_activity(Kind::TaskGraph, task_graph::TASK, corr, start, end, Payload::TaskGraph(&p));
}

fn device_record(a: &Activity, corr: u64) {
    match a {
        Activity::Kernel(k) => {
            if !kind_enabled(Kind::KernelDispatch) {
                return;
            }
            let mut p = KernelDispatchPayload {
                queue: queue_id(k.place.context, k.place.stream),
                // SAFETY: CUPTI's kernel names live for the process.
                kernel_name: unsafe { demangled(k.name) },
                work_dim: 3,
                device: device_id(k.place.device),
                device_start: k.start,
                device_end: k.end,
                ..Default::default()
            };
            for i in 0..3 {
                p.local_size[i] = k.block[i].max(0) as u64;
                p.global_size[i] = k.grid[i].max(0) as u64 * p.local_size[i];
            }
            emit_activity(
                Kind::KernelDispatch,
                kernel_dispatch::LAUNCH,
                corr,
                k.start,
                k.end,
                Payload::KernelDispatch(&p),
            );
        }
        Activity::Copy(c) => {
            let p = MemoryCopyPayload {
                queue: queue_id(c.place.context, c.place.stream),
                size: c.bytes,
                device: device_id(c.place.device),
                direction: copy_direction(c.kind),
                src_type: memory_type(c.src_kind),
                dst_type: memory_type(c.dst_kind),
                device_start: c.start,
                device_end: c.end,
                ..Default::default()
            };
            let op = memory_copy::cuda(copy_kind_value(c.kind), c.src_kind, c.dst_kind);
            emit_activity(Kind::MemoryCopy, op, corr, c.start, c.end, Payload::MemoryCopy(&p));
        }
        Activity::Set(s) => {
            let p = MemoryFillPayload {
                queue: queue_id(s.place.context, s.place.stream),
                pattern: u64::from(s.value),
                pattern_size: 1,
                size: s.bytes,
                device: device_id(s.place.device),
                device_start: s.start,
                device_end: s.end,
                ..Default::default()
            };
            let op = memory_fill::cuda(s.memory_kind);
            emit_activity(Kind::MemoryFill, op, corr, s.start, s.end, Payload::MemoryFill(&p));
        }
        Activity::Sync(s) => {
            let op = if s.kind == SyncKind::EventSynchronize || s.kind == SyncKind::StreamWaitEvent {
                sync_op::WAIT
            } else {
                sync_op::BARRIER
            };
            let queue = if s.stream == u32::MAX { 0 } else { queue_id(s.context, s.stream) };
            let p = SyncPayload {
                object: if s.event == u32::MAX { 0 } else { u64::from(s.event) },
                event_count: u32::from(s.event != u32::MAX),
                queue,
                device: 0,
                device_start: s.start,
                device_end: s.end,
            };
            emit_activity(Kind::Sync, op, corr, s.start, s.end, Payload::Sync(&p));
        }
        Activity::Marker(m) => {
            if let Some(defs) = offtrace_recorder::definitions() {
                let mut ranges = OPEN_RANGES.lock().unwrap_or_else(|e| e.into_inner());
                for r in ranges.marker(m, std::process::id(), |b| defs.string(b)) {
                    defs.push(r);
                }
            }
        }
        Activity::Graph(g) => {
            let p = TaskGraphPayload {
                node: u64::from(g.graph),
                queue: queue_id(g.place.context, g.place.stream),
                ..Default::default()
            };
            emit_activity(Kind::TaskGraph, task_graph::TASK, corr, g.start, g.end, Payload::TaskGraph(&p));
        }
        _ => {}
    }
}

/// NVTX ranges whose start CUPTI delivered and whose end it has not (CUPTI's buffer thread).
static OPEN_RANGES: Mutex<OpenRanges> = Mutex::new(OpenRanges { open: Vec::new() });

/// Most NVTX ranges open at once (a program that never ends its ranges must not grow this).
const OPEN_RANGES_MAX: usize = 4096;

/// Pairs CUPTI's NVTX marker records: a range's start (its name and time) waits for its end
/// (same id, no name), and the pair becomes the trace's `MARKER` range enter and exit at CUPTI's
/// times; a mark is one record. They go into the trace directly, not through the services'
/// `emit_activity`: a record's time there is the time of delivery (on CUPTI's buffer thread,
/// up to a flush period late), and a range needs its start and end time. CUPTI's marker
/// records name a pthread id, not the OS thread: the records are on the process's main thread
/// (tid = pid), where programs usually open their ranges.
#[derive(Debug)]
pub struct OpenRanges {
    /// (CUPTI's range id, name, start) in start order.
    open: Vec<(u32, Box<[u8]>, u64)>,
}

impl OpenRanges {
    /// The trace records of one CUPTI marker record (none for a range's start, or an end
    /// whose start was not seen); `string` interns a name.
    pub fn marker(
        &mut self,
        m: &MarkerActivity,
        tid: u32,
        mut string: impl FnMut(&[u8]) -> offtrace_format::StrId,
    ) -> Vec<offtrace_format::Record> {
        use offtrace_format::{MarkerRecord, Record, phase};
        let name = || if m.name.is_null() { Box::default() } else { unsafe_name(m.name) };
        let record = |op, phase, ts, message, range_id| {
            Record::Marker(MarkerRecord { op, phase, tid, ts, correlation: 0, message, range_id })
        };
        if m.is_start() {
            if self.open.len() >= OPEN_RANGES_MAX {
                self.open.remove(0);
            }
            self.open.push((m.id, name(), m.timestamp));
            return Vec::new();
        }
        if m.is_end() {
            let Some(i) = self.open.iter().rposition(|o| o.0 == m.id) else { return Vec::new() };
            let (id, name, start) = self.open.remove(i);
            let message = string(&name);
            let id = u64::from(id);
            return vec![
                record(marker_op::RANGE, phase::ENTER, start, message, id),
                record(marker_op::RANGE, phase::EXIT, m.timestamp.max(start), message, id),
            ];
        }
        vec![record(marker_op::MARK, phase::NONE, m.timestamp, string(&name()), 0)]
    }
}

/// A copy of CUPTI's NUL-terminated marker name.
fn unsafe_name(name: *const c_char) -> Box<[u8]> {
    // SAFETY: CUPTI's marker name is NUL-terminated and valid while its buffer is processed.
    unsafe { CStr::from_ptr(name) }.to_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_tables_cover_every_callback_id() {
        for d in [ApiDomain::Runtime, ApiDomain::Driver] {
            let ops = operations(d);
            assert_eq!(ops.len(), d.functions().len());
            assert!(ops.windows(2).all(|w| w[0].id < w[1].id));
        }
        let launch = operations(ApiDomain::Driver).iter().find(|o| o.name == "cuLaunchKernel").expect("op");
        assert_eq!(launch.args.len(), 11);
        assert_eq!(launch.args[9].name, "kernelParams");
        assert_eq!(launch.args[9].format, ArgFormat::Pointer);
        assert_eq!(launch.args[9].indirection_count(), 2);
    }

    #[test]
    fn copies_and_memsets_take_cuptis_kinds_for_their_names() {
        let copy = |k, s, d| Kind::MemoryCopy.operation(memory_copy::cuda(copy_kind_value(k), s, d)).map(|o| o.name);
        let (pageable, pinned, device) = (
            l::CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE as u32,
            l::CUPTI_ACTIVITY_MEMORY_KIND_PINNED as u32,
            l::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE as u32,
        );
        assert_eq!(copy(CopyKind::HostToDevice, pageable, device), Some("Memcpy HtoD (Pageable -> Device)"));
        assert_eq!(copy(CopyKind::DeviceToHost, device, pinned), Some("Memcpy DtoH (Device -> Pinned)"));
        assert_eq!(copy(CopyKind::DeviceToDevice, device, device), Some("Memcpy DtoD (Device -> Device)"));
        assert_eq!(copy(CopyKind::PeerToPeer, device, device), Some("Memcpy PtoP (Device -> Device)"));
        for k in [CopyKind::HostToArray, CopyKind::ArrayToHost, CopyKind::HostToHost, CopyKind::Unknown] {
            assert_eq!(CopyKind::from_cupti(copy_kind_value(k) as u8), k);
        }
        assert_eq!(Kind::MemoryFill.operation(memory_fill::cuda(device)).map(|o| o.name), Some("Memset (Device)"));
    }

    #[test]
    fn nvtx_range_start_and_end_become_one_named_range_at_cuptis_times() {
        use offtrace_format::{MarkerRecord, Record, StrId, phase};
        let flag = |f: i64| f as u32;
        let m = |flags, timestamp, id, name: &CStr| MarkerActivity {
            flags,
            timestamp,
            id,
            name: if name.is_empty() { std::ptr::null() } else { name.as_ptr() },
            domain: std::ptr::null(),
        };
        let names = std::cell::RefCell::new(Vec::<Vec<u8>>::new());
        let intern = |b: &[u8]| {
            names.borrow_mut().push(b.to_vec());
            StrId(names.borrow().len() as u32)
        };
        let mut r = OpenRanges { open: Vec::new() };
        let start = m(flag(l::CUPTI_ACTIVITY_FLAG_MARKER_START), 100, 7, c"step");
        let inner = m(flag(l::CUPTI_ACTIVITY_FLAG_MARKER_START), 120, 8, c"train");
        assert!(r.marker(&start, 42, intern).is_empty(), "a start waits for its end");
        assert!(r.marker(&inner, 42, intern).is_empty());
        let end_inner = r.marker(&m(flag(l::CUPTI_ACTIVITY_FLAG_MARKER_END), 150, 8, c""), 42, intern);
        let end = r.marker(&m(flag(l::CUPTI_ACTIVITY_FLAG_MARKER_END), 400, 7, c""), 42, intern);
        let range = |ph, ts, message, range_id| {
            Record::Marker(MarkerRecord {
                op: marker_op::RANGE,
                phase: ph,
                tid: 42,
                ts,
                correlation: 0,
                message,
                range_id,
            })
        };
        assert_eq!(end_inner, [range(phase::ENTER, 120, StrId(1), 8), range(phase::EXIT, 150, StrId(1), 8)]);
        assert_eq!(end, [range(phase::ENTER, 100, StrId(2), 7), range(phase::EXIT, 400, StrId(2), 7)]);
        assert_eq!(
            *names.borrow(),
            [b"train".to_vec(), b"step".to_vec()],
            "the end carries its start's name, no unnamed row"
        );
        assert!(r.marker(&m(flag(l::CUPTI_ACTIVITY_FLAG_MARKER_END), 500, 7, c""), 42, intern).is_empty());
        let mark = r.marker(&m(flag(l::CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS), 600, 9, c"here"), 42, intern);
        assert_eq!(
            mark,
            [Record::Marker(MarkerRecord {
                op: marker_op::MARK,
                phase: phase::NONE,
                tid: 42,
                ts: 600,
                correlation: 0,
                message: StrId(3),
                range_id: 0
            })]
        );
        assert!(r.open.is_empty());
    }
}
