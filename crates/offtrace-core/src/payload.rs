//! Kind-specific payloads: what a callback record's `payload` pointer points at.
//!
//! Every payload is `#[repr(C)]` (the C header declares the same structs) and is only valid
//! during the callback that receives it. Built-in payloads are flat: their leading fields are
//! the ones the kind's [`crate::kind::ArgDescriptor`]s name, in order, so argument iteration
//! reads them generically through [`Payload::arg_values`].

#![allow(unsafe_code)] // `arg_values` reads a payload through the pointer a callback record carries

use std::ffi::{c_char, c_void};

use crate::kind::Kind;

/// Maximum number of parameters carried for one API call (UR functions have at most 17);
/// one more than `offtrace_format::record::MAX_ARGS`: `urEnqueueUSMMemcpy2D`-style calls have 17.
pub const MAX_ARGS: usize = 17;
/// Maximum number of kernel arguments carried by a dispatch record.
pub const MAX_KERNEL_ARGS: usize = 32;

/// An API call (`UR_API`): the function's raw argument values and, at exit, its result.
///
/// `args[i]` is the argument variable itself (a handle, pointer, size or enum), one `u64` per
/// parameter in declaration order, as in `ArgBlock` of the record model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct ApiCallPayload {
    pub function_id: u32,
    pub arg_count: u32,
    /// The function's result (`ur_result_t`); meaningful when `has_result` is 1 (exit phase).
    pub result: i32,
    pub has_result: u32,
    pub args: [u64; MAX_ARGS],
}

impl ApiCallPayload {
    pub fn new(function_id: u32, args: &[u64]) -> Self {
        let n = args.len().min(MAX_ARGS);
        let mut a = [0u64; MAX_ARGS];
        a[..n].copy_from_slice(&args[..n]);
        Self { function_id, arg_count: n as u32, result: 0, has_result: 0, args: a }
    }
}

/// `SYCL_QUEUE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct QueuePayload {
    pub queue: u64,
    pub device: u64,
    pub context: u64,
    pub flags: u64,
}

/// The type of an allocation (`offtrace_memory_type_t`, the values of `ze_memory_type_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum MemoryType {
    #[default]
    Unknown = 0,
    Host = 1,
    Device = 2,
    Shared = 3,
}

impl MemoryType {
    pub fn from_u32(v: u32) -> Self {
        match v {
            1 => Self::Host,
            2 => Self::Device,
            3 => Self::Shared,
            _ => Self::Unknown,
        }
    }
}

/// A memory range a kernel uses without naming it in an argument (printf or scratch surface).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct ImplicitAllocation {
    pub base: u64,
    pub size: u64,
    pub memory_type: MemoryType,
}

/// `KERNEL_DISPATCH`: a kernel enqueue, with the kernel's raw argument values (pointer
/// arguments are matched against the live allocation table by
/// [`crate::allocation::kernel_allocation_properties`]).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct KernelDispatchPayload {
    pub queue: u64,
    pub kernel: u64,
    /// NUL-terminated, valid during the callback; may be null.
    pub kernel_name: *const c_char,
    pub work_dim: u32,
    pub kernel_arg_count: u32,
    pub global_size: [u64; 3],
    pub local_size: [u64; 3],
    pub kernel_args: [u64; MAX_KERNEL_ARGS],
    pub implicit_allocations: *const ImplicitAllocation,
    pub implicit_allocation_count: u64,
}

impl Default for KernelDispatchPayload {
    fn default() -> Self {
        Self {
            queue: 0,
            kernel: 0,
            kernel_name: std::ptr::null(),
            work_dim: 0,
            kernel_arg_count: 0,
            global_size: [0; 3],
            local_size: [0; 3],
            kernel_args: [0; MAX_KERNEL_ARGS],
            implicit_allocations: std::ptr::null(),
            implicit_allocation_count: 0,
        }
    }
}

/// `MEMORY_COPY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct MemoryCopyPayload {
    pub queue: u64,
    pub dst: u64,
    pub src: u64,
    pub size: u64,
}

/// `MEMORY_FILL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct MemoryFillPayload {
    pub queue: u64,
    pub dst: u64,
    pub pattern: u64,
    pub pattern_size: u64,
    pub size: u64,
}

/// `MEMORY_ALLOC` (operation `alloc` or `free`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct MemoryAllocPayload {
    pub ptr: u64,
    pub size: u64,
    pub memory_type: MemoryType,
    pub device: u64,
}

/// `TASK_GRAPH`: node ids are the runtime's event ids (XPTI uid64).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct TaskGraphPayload {
    pub node: u64,
    pub source: u64,
    pub target: u64,
    pub name: *const c_char,
    pub ur_event: u64,
}

impl Default for TaskGraphPayload {
    fn default() -> Self {
        Self { node: 0, source: 0, target: 0, name: std::ptr::null(), ur_event: 0 }
    }
}

/// `SYNC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct SyncPayload {
    pub object: u64,
    pub event_count: u32,
}

/// `CODE_OBJECT`.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct CodeObjectPayload {
    pub handle: u64,
    pub program: u64,
    pub name: *const c_char,
    pub binary_size: u64,
}

impl Default for CodeObjectPayload {
    fn default() -> Self {
        Self { handle: 0, program: 0, name: std::ptr::null(), binary_size: 0 }
    }
}

/// `MARKER`.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct MarkerPayload {
    pub message: *const c_char,
    pub range_id: u64,
}

/// `XPTI`: one raw notification, as the dispatcher passed it to the subscriber callback.
/// The pointers are the runtime's, valid during the callback only.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct XptiPayload {
    /// The stream's name (NUL-terminated), or null when the backend does not know it.
    pub stream: *const c_char,
    /// The dispatcher's stream id (8-bit).
    pub stream_id: u64,
    /// `xpti::trace_event_data_t*` of the parent, may be null.
    pub parent: u64,
    /// `xpti::trace_event_data_t*` of the event, may be null.
    pub event: u64,
    /// The notification's instance number (begin and end of one call share it).
    pub instance: u64,
    /// The type-specific user data (`function_with_args_t*`, `mem_alloc_data_t*`, ...), may be null.
    pub user_data: u64,
    /// The trace point type (= the record's operation).
    pub trace_type: u32,
    /// Backend-private classification of the stream (the agent's stream kind), 0 = none.
    pub stream_class: u32,
}

impl Default for XptiPayload {
    fn default() -> Self {
        Self {
            stream: std::ptr::null(),
            stream_id: 0,
            parent: 0,
            event: 0,
            instance: 0,
            user_data: 0,
            trace_type: 0,
            stream_class: 0,
        }
    }
}

/// A payload the backend hands to the services, typed by kind. The services pass a pointer to
/// the inner struct to callbacks; [`Payload::arg_values`] feeds argument iteration.
#[derive(Debug, Clone, Copy)]
pub enum Payload<'a> {
    None,
    ApiCall(&'a ApiCallPayload),
    Queue(&'a QueuePayload),
    KernelDispatch(&'a KernelDispatchPayload),
    MemoryCopy(&'a MemoryCopyPayload),
    MemoryFill(&'a MemoryFillPayload),
    MemoryAlloc(&'a MemoryAllocPayload),
    TaskGraph(&'a TaskGraphPayload),
    Sync(&'a SyncPayload),
    CodeObject(&'a CodeObjectPayload),
    Marker(&'a MarkerPayload),
    Xpti(&'a XptiPayload),
    OpenclApi(&'a ApiCallPayload),
}

impl Payload<'_> {
    /// The kind whose payload this is (`None` for [`Payload::None`]).
    #[inline]
    pub fn kind(&self) -> Option<Kind> {
        // The variant's position, then a table: LLVM folds the first `match` to the enum's tag
        // (a `match` returning the kinds became a jump table on the exit path).
        const KINDS: [Option<Kind>; 13] = [
            None,
            Some(Kind::UrApi),
            Some(Kind::SyclQueue),
            Some(Kind::KernelDispatch),
            Some(Kind::MemoryCopy),
            Some(Kind::MemoryFill),
            Some(Kind::MemoryAlloc),
            Some(Kind::TaskGraph),
            Some(Kind::Sync),
            Some(Kind::CodeObject),
            Some(Kind::Marker),
            Some(Kind::Xpti),
            Some(Kind::OpenclApi),
        ];
        let i = match self {
            Payload::None => 0,
            Payload::ApiCall(_) => 1,
            Payload::Queue(_) => 2,
            Payload::KernelDispatch(_) => 3,
            Payload::MemoryCopy(_) => 4,
            Payload::MemoryFill(_) => 5,
            Payload::MemoryAlloc(_) => 6,
            Payload::TaskGraph(_) => 7,
            Payload::Sync(_) => 8,
            Payload::CodeObject(_) => 9,
            Payload::Marker(_) => 10,
            Payload::Xpti(_) => 11,
            Payload::OpenclApi(_) => 12,
        };
        KINDS[i]
    }

    /// The pointer C callbacks receive as `record.payload`.
    #[inline]
    pub fn as_ptr(&self) -> *const c_void {
        match *self {
            Payload::None => std::ptr::null(),
            Payload::ApiCall(p) => (p as *const ApiCallPayload).cast(),
            Payload::Queue(p) => (p as *const QueuePayload).cast(),
            Payload::KernelDispatch(p) => (p as *const KernelDispatchPayload).cast(),
            Payload::MemoryCopy(p) => (p as *const MemoryCopyPayload).cast(),
            Payload::MemoryFill(p) => (p as *const MemoryFillPayload).cast(),
            Payload::MemoryAlloc(p) => (p as *const MemoryAllocPayload).cast(),
            Payload::TaskGraph(p) => (p as *const TaskGraphPayload).cast(),
            Payload::Sync(p) => (p as *const SyncPayload).cast(),
            Payload::CodeObject(p) => (p as *const CodeObjectPayload).cast(),
            Payload::Marker(p) => (p as *const MarkerPayload).cast(),
            Payload::Xpti(p) => (p as *const XptiPayload).cast(),
            Payload::OpenclApi(p) => (p as *const ApiCallPayload).cast(),
        }
    }

    /// Up to six leading `u64` values a buffer record keeps of this payload (documented per
    /// kind in the C header: the kind's first argument descriptors, in order).
    #[inline]
    pub fn summary(&self) -> [u64; 6] {
        match *self {
            Payload::None => [0; 6],
            Payload::ApiCall(p) => p.summary(),
            Payload::Queue(p) => p.summary(),
            Payload::KernelDispatch(p) => p.summary(),
            Payload::MemoryCopy(p) => p.summary(),
            Payload::MemoryFill(p) => p.summary(),
            Payload::MemoryAlloc(p) => p.summary(),
            Payload::TaskGraph(p) => p.summary(),
            Payload::Sync(p) => p.summary(),
            Payload::CodeObject(p) => p.summary(),
            Payload::Marker(p) => p.summary(),
            Payload::Xpti(p) => p.summary(),
            Payload::OpenclApi(p) => p.summary(),
        }
    }
}

/// A payload struct's [`Payload::summary`], per type: a record path that knows the payload's
/// type at compile time (`emit_activity`, monomorphised per type) reads the fields directly,
/// without matching on [`Payload`].
pub(crate) trait Summary {
    fn summary(&self) -> [u64; 6];
}

macro_rules! summary {
    ($($t:ty => |$p:ident| $e:expr;)*) => {$(
        impl Summary for $t {
            #[inline(always)]
            fn summary(&self) -> [u64; 6] {
                let $p = self;
                $e
            }
        }
    )*};
}

summary! {
    ApiCallPayload => |p| [u64::from(p.function_id), p.result as u64, p.args[0], p.args[1], p.args[2], p.args[3]];
    QueuePayload => |p| [p.queue, p.device, p.context, p.flags, 0, 0];
    KernelDispatchPayload => |p| {
        [p.queue, p.kernel, p.global_size[0], p.global_size[1], p.global_size[2], u64::from(p.work_dim)]
    };
    MemoryCopyPayload => |p| [p.queue, p.dst, p.src, p.size, 0, 0];
    MemoryFillPayload => |p| [p.queue, p.dst, p.pattern, p.pattern_size, p.size, 0];
    MemoryAllocPayload => |p| [p.ptr, p.size, p.memory_type as u64, p.device, 0, 0];
    TaskGraphPayload => |p| [p.node, p.source, p.target, p.name as u64, p.ur_event, 0];
    SyncPayload => |p| [p.object, u64::from(p.event_count), 0, 0, 0, 0];
    CodeObjectPayload => |p| [p.handle, p.program, p.name as u64, p.binary_size, 0, 0];
    MarkerPayload => |p| [p.message as u64, p.range_id, 0, 0, 0, 0];
    XptiPayload => |p| [p.stream as u64, p.stream_id, p.parent, p.event, p.instance, p.user_data];
}

/// Raw values of the arguments of one record, for argument iteration: `(value, address)` where
/// the address points into the payload.
///
/// # Safety
///
/// `payload` must point at the payload struct of `kind` (as delivered in a callback record) and
/// be valid for reads for the duration of the call.
pub(crate) unsafe fn arg_values(kind: Kind, payload: *const c_void, out: &mut Vec<(u64, *const c_void)>) {
    out.clear();
    if payload.is_null() {
        return;
    }
    fn push<T>(out: &mut Vec<(u64, *const c_void)>, v: u64, r: &T) {
        out.push((v, (r as *const T).cast()));
    }
    // SAFETY (each arm): the caller guarantees `payload` points at a live payload of `kind`,
    // and each kind has exactly one payload struct (see `Payload`).
    unsafe {
        match kind {
            Kind::UrApi | Kind::OpenclApi => {
                let p = &*payload.cast::<ApiCallPayload>();
                for i in 0..(p.arg_count as usize).min(MAX_ARGS) {
                    push(out, p.args[i], &p.args[i]);
                }
            }
            Kind::SyclQueue => {
                let p = &*payload.cast::<QueuePayload>();
                push(out, p.queue, &p.queue);
                push(out, p.device, &p.device);
                push(out, p.context, &p.context);
                push(out, p.flags, &p.flags);
            }
            Kind::KernelDispatch => {
                let p = &*payload.cast::<KernelDispatchPayload>();
                push(out, p.queue, &p.queue);
                push(out, p.kernel, &p.kernel);
                push(out, p.kernel_name as u64, &p.kernel_name);
                push(out, u64::from(p.work_dim), &p.work_dim);
                for g in &p.global_size {
                    push(out, *g, g);
                }
                for l in &p.local_size {
                    push(out, *l, l);
                }
            }
            Kind::MemoryCopy => {
                let p = &*payload.cast::<MemoryCopyPayload>();
                push(out, p.queue, &p.queue);
                push(out, p.dst, &p.dst);
                push(out, p.src, &p.src);
                push(out, p.size, &p.size);
            }
            Kind::MemoryFill => {
                let p = &*payload.cast::<MemoryFillPayload>();
                push(out, p.queue, &p.queue);
                push(out, p.dst, &p.dst);
                push(out, p.pattern, &p.pattern);
                push(out, p.pattern_size, &p.pattern_size);
                push(out, p.size, &p.size);
            }
            Kind::MemoryAlloc => {
                let p = &*payload.cast::<MemoryAllocPayload>();
                push(out, p.ptr, &p.ptr);
                push(out, p.size, &p.size);
                push(out, p.memory_type as u64, &p.memory_type);
                push(out, p.device, &p.device);
            }
            Kind::TaskGraph => {
                let p = &*payload.cast::<TaskGraphPayload>();
                push(out, p.node, &p.node);
                push(out, p.source, &p.source);
                push(out, p.target, &p.target);
                push(out, p.name as u64, &p.name);
                push(out, p.ur_event, &p.ur_event);
            }
            Kind::Sync => {
                let p = &*payload.cast::<SyncPayload>();
                push(out, p.object, &p.object);
                push(out, u64::from(p.event_count), &p.event_count);
            }
            Kind::CodeObject => {
                let p = &*payload.cast::<CodeObjectPayload>();
                push(out, p.handle, &p.handle);
                push(out, p.program, &p.program);
                push(out, p.name as u64, &p.name);
                push(out, p.binary_size, &p.binary_size);
            }
            Kind::Marker => {
                let p = &*payload.cast::<MarkerPayload>();
                push(out, p.message as u64, &p.message);
                push(out, p.range_id, &p.range_id);
            }
            Kind::Xpti => {
                let p = &*payload.cast::<XptiPayload>();
                push(out, p.stream as u64, &p.stream);
                push(out, p.stream_id, &p.stream_id);
                push(out, p.parent, &p.parent);
                push(out, p.event, &p.event);
                push(out, p.instance, &p.instance);
                push(out, p.user_data, &p.user_data);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Payload::kind`'s table is indexed by the variant's position: each variant maps to its
    /// own kind, and `Summary` per type agrees with `Payload::summary`.
    #[test]
    fn kind_and_summary_of_every_variant() {
        let api = ApiCallPayload::new(7, &[1, 2, 3, 4, 5]);
        let queue = QueuePayload { queue: 1, device: 2, context: 3, flags: 4 };
        let kernel =
            KernelDispatchPayload { queue: 1, kernel: 2, global_size: [3, 4, 5], work_dim: 3, ..Default::default() };
        let copy = MemoryCopyPayload { queue: 1, dst: 2, src: 3, size: 4 };
        let fill = MemoryFillPayload { queue: 1, dst: 2, pattern: 3, pattern_size: 4, size: 5 };
        let alloc = MemoryAllocPayload { ptr: 1, size: 2, memory_type: MemoryType::Device, device: 4 };
        let graph = TaskGraphPayload { node: 1, source: 2, target: 3, ur_event: 5, ..Default::default() };
        let sync = SyncPayload { object: 1, event_count: 2 };
        let code = CodeObjectPayload { handle: 1, program: 2, binary_size: 4, ..Default::default() };
        let marker = MarkerPayload { message: std::ptr::null(), range_id: 2 };
        let xpti = XptiPayload { stream_id: 2, parent: 3, event: 4, instance: 5, user_data: 6, ..Default::default() };
        let cases: [(Payload<'_>, Option<Kind>, [u64; 6]); 12] = [
            (Payload::None, None, [0; 6]),
            (Payload::ApiCall(&api), Some(Kind::UrApi), api.summary()),
            (Payload::Queue(&queue), Some(Kind::SyclQueue), queue.summary()),
            (Payload::KernelDispatch(&kernel), Some(Kind::KernelDispatch), kernel.summary()),
            (Payload::MemoryCopy(&copy), Some(Kind::MemoryCopy), copy.summary()),
            (Payload::MemoryFill(&fill), Some(Kind::MemoryFill), fill.summary()),
            (Payload::MemoryAlloc(&alloc), Some(Kind::MemoryAlloc), alloc.summary()),
            (Payload::TaskGraph(&graph), Some(Kind::TaskGraph), graph.summary()),
            (Payload::Sync(&sync), Some(Kind::Sync), sync.summary()),
            (Payload::CodeObject(&code), Some(Kind::CodeObject), code.summary()),
            (Payload::Marker(&marker), Some(Kind::Marker), marker.summary()),
            (Payload::Xpti(&xpti), Some(Kind::Xpti), xpti.summary()),
        ];
        for (p, kind, summary) in cases {
            assert_eq!(p.kind(), kind, "{p:?}");
            assert_eq!(p.summary(), summary, "{p:?}");
        }
        assert_eq!(api.summary(), [7, 0, 1, 2, 3, 4]);
        assert_eq!(kernel.summary(), [1, 2, 3, 4, 5, 3]);
        assert_eq!(alloc.summary(), [1, 2, 2, 4, 0, 0]);
    }
}
