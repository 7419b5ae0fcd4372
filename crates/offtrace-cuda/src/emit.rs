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
//! | `GRAPH_TRACE` | `TASK_GRAPH` task activity (one graph launch) |
//! | resource: module loaded / unloading | `CODE_OBJECT` program LOAD / UNLOAD (module id, cubin size) |
//! | resource: graph node created, dependency created | `TASK_GRAPH` node_create / edge_create (CUPTI's graph node ids, the ids kernel records carry) |
//! | driver/runtime allocation and free calls | `MEMORY_ALLOC` alloc / free + the live allocation table |
//! | launch calls | `KERNEL_DISPATCH` launch instant with the kernel's pointer-sized parameters (kernel allocation properties) |
//!
//! Device records carry the correlation id of the API call that caused them (`corr`, 0 when
//! the call was not traced).

use std::ffi::c_char;
use std::sync::OnceLock;

use offtrace_core::{
    ArgDescriptor, ArgFormat, CodeObjectPayload, KernelDispatchPayload, Kind, MarkerPayload, MemoryAllocPayload,
    MemoryCopyPayload, MemoryFillPayload, MemoryType, Operation, Payload, Phase, SyncPayload, TaskGraphPayload,
    code_object, emit_activity, emit_instant, kernel_dispatch, kind_enabled, marker_op, memory_copy, memory_fill,
    sync_op, task_graph,
};

use crate::activity::{Activity, SyncKind};
use crate::injection::Injection;
use crate::table::{ApiDomain, ApiFunction, ParamFormat};

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
/// filters). A no-op until the services have the CUDA API kinds.
pub fn register_api_tables() {
    let _ = operations(ApiDomain::Runtime);
    let _ = operations(ApiDomain::Driver);
}

/// An API call whose enter was delivered; its exit is owed on the same thread.
#[derive(Debug)]
pub struct OpenCall {
    domain: ApiDomain,
    cbid: u32,
    correlation: u64,
}

impl OpenCall {
    pub fn correlation(&self) -> u64 {
        self.correlation
    }
    pub fn matches(&self, domain: ApiDomain, cbid: u32) -> bool {
        self.domain == domain && self.cbid == cbid
    }
}

/// The services' kind of an API domain, where the services have one.
fn api_kind(_domain: ApiDomain) -> Option<Kind> {
    None
}

/// Whether a services context wants `CUDA_DRIVER_API` now.
pub fn driver_api_kind_enabled() -> bool {
    api_kind(ApiDomain::Driver).is_some_and(kind_enabled)
}

/// Enter of an API call.
///
/// # Safety
/// `params` is null or `f`'s CUPTI parameter struct, valid during the call.
pub unsafe fn api_enter(domain: ApiDomain, f: &ApiFunction, params: *const u8, _cupti_corr: u32) -> Option<OpenCall> {
    let _kind = api_kind(domain)?;
    let _ = (f, params);
    None
}

/// Exit of an API call entered with [`api_enter`].
///
/// # Safety
/// As for [`api_enter`].
pub unsafe fn api_exit(call: OpenCall, f: &ApiFunction, params: *const u8, result: i32) {
    let _ = (call, f, params, result);
}

pub fn memory_alloc(ptr: u64, size: u64, memory_type: MemoryType) {
    offtrace_core::emit_memory_alloc(&MemoryAllocPayload { ptr, size, memory_type, device: 0 });
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

/// A kernel launch with its pointer-sized parameter values (for allocation properties).
pub fn kernel_dispatch(function: u64, args: &[u64], _cupti_corr: u32) {
    let mut p = KernelDispatchPayload { kernel: function, work_dim: 3, ..Default::default() };
    let n = args.len().min(p.kernel_args.len());
    p.kernel_args[..n].copy_from_slice(&args[..n]);
    p.kernel_arg_count = n as u32;
    emit_instant(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, Payload::KernelDispatch(&p));
}

pub fn module(id: u32, cubin_size: u64, loaded: bool) {
    let p = CodeObjectPayload { handle: u64::from(id), program: 0, name: std::ptr::null(), binary_size: cubin_size };
    let phase = if loaded { Phase::Load } else { Phase::Unload };
    emit_instant(Kind::CodeObject, code_object::PROGRAM, phase, Payload::CodeObject(&p));
}

pub fn graph_node(graph: u32, node: u64, _node_type: u32) {
    let p = TaskGraphPayload { node, source: u64::from(graph), target: 0, name: std::ptr::null(), ur_event: 0 };
    emit_instant(Kind::TaskGraph, task_graph::NODE_CREATE, Phase::None, Payload::TaskGraph(&p));
}

pub fn graph_edge(graph: u32, from: u64, to: u64) {
    let p = TaskGraphPayload { node: u64::from(graph), source: from, target: to, name: std::ptr::null(), ur_event: 0 };
    emit_instant(Kind::TaskGraph, task_graph::EDGE_CREATE, Phase::None, Payload::TaskGraph(&p));
}

/// Records CUPTI lost (its buffers were full).
pub fn dropped(_n: u64) {}

/// End of tracing.
pub fn finish(_inj: &Injection) {}

/// One device record, on CUPTI's buffer thread.
pub fn activity(a: &Activity, corr: u64) {
    match a {
        Activity::Kernel(k) => {
            let mut p = KernelDispatchPayload {
                queue: u64::from(k.place.stream),
                kernel_name: k.name,
                work_dim: 3,
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
            let p = MemoryCopyPayload { queue: u64::from(c.place.stream), dst: 0, src: 0, size: c.bytes };
            emit_activity(Kind::MemoryCopy, memory_copy::USM_MEMCPY, corr, c.start, c.end, Payload::MemoryCopy(&p));
        }
        Activity::Set(s) => {
            let p = MemoryFillPayload {
                queue: u64::from(s.place.stream),
                dst: 0,
                pattern: u64::from(s.value),
                pattern_size: 1,
                size: s.bytes,
            };
            emit_activity(Kind::MemoryFill, memory_fill::USM_FILL, corr, s.start, s.end, Payload::MemoryFill(&p));
        }
        Activity::Sync(s) => {
            let op = if s.kind == SyncKind::EventSynchronize || s.kind == SyncKind::StreamWaitEvent {
                sync_op::WAIT
            } else {
                sync_op::BARRIER
            };
            let p = SyncPayload { object: u64::from(s.stream), event_count: u32::from(s.event != u32::MAX) };
            emit_activity(Kind::Sync, op, corr, s.start, s.end, Payload::Sync(&p));
        }
        Activity::Marker(m) => {
            let p = MarkerPayload { message: m.name as *const c_char, range_id: u64::from(m.id) };
            let op = if m.is_instant() { marker_op::MARK } else { marker_op::RANGE };
            emit_activity(Kind::Marker, op, 0, m.timestamp, m.timestamp, Payload::Marker(&p));
        }
        Activity::Graph(g) => {
            let p = TaskGraphPayload {
                node: u64::from(g.graph),
                source: 0,
                target: 0,
                name: std::ptr::null(),
                ur_event: 0,
            };
            emit_activity(Kind::TaskGraph, task_graph::TASK, corr, g.start, g.end, Payload::TaskGraph(&p));
        }
        _ => {}
    }
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
}
