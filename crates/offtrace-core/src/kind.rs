//! Kinds (tracing domains), their operations, and the argument descriptors used to decode them.
//!
//! A [`Kind`] is a domain such as `UR_API` or `KERNEL_DISPATCH`; an operation is one member of a
//! kind (for an API kind: one function, identified by the runtime's own function id). The
//! built-in kinds describe their operations here. An API kind's operations come from its backend:
//! each backend calls [`register_kind_operations`] once at startup with a `'static` table for its
//! own kind (`UR_API`: generated from `ur_api.h`; `OPENCL_API`, `CUDA_RUNTIME_API`,
//! `CUDA_DRIVER_API`: from their headers, by their backends), so this crate never depends on a
//! backend; several backends register side by side, each kind once. The recorder writes every
//! kind's table into the trace as definitions, so a reader names every call of every runtime.
//! Lookups are cold (names, argument iteration); nothing here is on the record path.

use std::sync::OnceLock;

/// A tracing domain. The numeric values are the C API's `offtrace_tracing_kind_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum Kind {
    /// Every Unified Runtime function; operation = `ur_function_t`.
    UrApi = 1,
    /// Queues / streams as definitions: creation (with device, context and flags), destruction,
    /// and (SYCL) command-group submission. Every device activity names its queue by this handle.
    Queue = 2,
    /// Device activity: a kernel enqueued on a device ([`crate::KernelDispatchPayload`]).
    KernelDispatch = 3,
    /// Device activity: a copy, with its direction and the memory types of both ends.
    MemoryCopy = 4,
    /// Device activity: a fill.
    MemoryFill = 5,
    /// USM/buffer allocation and release; feeds the live allocation table.
    MemoryAlloc = 6,
    /// The asynchronous task graph: nodes, edges, task begin/end, signals.
    TaskGraph = 7,
    /// Host waits (ENTER/EXIT) and barriers; a barrier enqueued on a queue is device activity.
    Sync = 8,
    /// Programs and kernels, reported as load/unload.
    CodeObject = 9,
    /// User ranges and marks from the marker API.
    Marker = 10,
    /// The optional raw layer: a runtime's own notifications, before any interpretation (SYCL:
    /// every XPTI notification, operation = the trace point type). The payload is the emitting
    /// backend's own struct (`Payload::Raw`, an opaque pointer for core; the SYCL backend's is
    /// `offtrace_callback_tracing_xpti_data_t`). Nothing downstream needs it: it exists to
    /// compare a trace with the runtime's stream.
    Xpti = 11,
    /// Every OpenCL function; operation = the backend's function id (its registered table).
    OpenclApi = 12,
    /// Every CUDA runtime function; operation = `CUpti_runtime_api_trace_cbid`.
    CudaRuntimeApi = 13,
    /// Every CUDA driver function; operation = `CUpti_driver_api_trace_cbid`.
    CudaDriverApi = 14,
    /// Devices and contexts as definitions ([`crate::DevicePayload`]).
    Device = 15,
    /// Counter definitions and samples ([`crate::CounterPayload`]): metrics and telemetry.
    Counter = 16,
}

/// Number of kind values including the unused 0; arrays indexed by kind have this length.
pub const KIND_COUNT: usize = 17;

impl Kind {
    pub const ALL: [Kind; KIND_COUNT - 1] = [
        Kind::UrApi,
        Kind::Queue,
        Kind::KernelDispatch,
        Kind::MemoryCopy,
        Kind::MemoryFill,
        Kind::MemoryAlloc,
        Kind::TaskGraph,
        Kind::Sync,
        Kind::CodeObject,
        Kind::Marker,
        Kind::Xpti,
        Kind::OpenclApi,
        Kind::CudaRuntimeApi,
        Kind::CudaDriverApi,
        Kind::Device,
        Kind::Counter,
    ];

    /// The API kinds: their operations are functions, registered by backends, and their payload
    /// is [`crate::ApiCallPayload`].
    pub const API: [Kind; 4] = [Kind::UrApi, Kind::OpenclApi, Kind::CudaRuntimeApi, Kind::CudaDriverApi];

    /// The kind with this C value, if any.
    pub fn from_u32(v: u32) -> Option<Kind> {
        Kind::ALL.get((v as usize).wrapping_sub(1)).copied()
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// The name tools print: `UR_API`, `KERNEL_DISPATCH`, ...
    pub fn name(self) -> &'static str {
        match self {
            Kind::UrApi => "UR_API",
            Kind::Queue => "QUEUE",
            Kind::KernelDispatch => "KERNEL_DISPATCH",
            Kind::MemoryCopy => "MEMORY_COPY",
            Kind::MemoryFill => "MEMORY_FILL",
            Kind::MemoryAlloc => "MEMORY_ALLOC",
            Kind::TaskGraph => "TASK_GRAPH",
            Kind::Sync => "SYNC",
            Kind::CodeObject => "CODE_OBJECT",
            Kind::Marker => "MARKER",
            Kind::Xpti => "XPTI",
            Kind::OpenclApi => "OPENCL_API",
            Kind::CudaRuntimeApi => "CUDA_RUNTIME_API",
            Kind::CudaDriverApi => "CUDA_DRIVER_API",
            Kind::Device => "DEVICE",
            Kind::Counter => "COUNTER",
        }
    }

    /// This kind's operations, sorted by id; empty for an API kind whose backend has not
    /// registered its table yet.
    pub fn operations(self) -> &'static [Operation] {
        match self {
            Kind::UrApi | Kind::OpenclApi | Kind::CudaRuntimeApi | Kind::CudaDriverApi => {
                REGISTERED[self.index()].get().copied().unwrap_or(&[])
            }
            Kind::Queue => QUEUE_OPS,
            Kind::KernelDispatch => KERNEL_DISPATCH_OPS,
            Kind::MemoryCopy => memory_copy_ops(),
            Kind::MemoryFill => memory_fill_ops(),
            Kind::MemoryAlloc => MEMORY_ALLOC_OPS,
            Kind::TaskGraph => TASK_GRAPH_OPS,
            Kind::Sync => SYNC_OPS,
            Kind::CodeObject => CODE_OBJECT_OPS,
            Kind::Marker => MARKER_OPS,
            Kind::Xpti => XPTI_OPS,
            Kind::Device => DEVICE_OPS,
            Kind::Counter => COUNTER_OPS,
        }
    }

    /// The operation with id `op`, if this kind has one.
    pub fn operation(self, op: u32) -> Option<&'static Operation> {
        // Copies and fills: the SYCL/OpenCL table first (static); the CUDA names are formatted
        // (about 1.2 M instructions, once) only when a CUDA operation is asked for.
        let first = match self {
            Kind::MemoryCopy => MEMORY_COPY_OPS,
            Kind::MemoryFill => MEMORY_FILL_OPS,
            _ => self.operations(),
        };
        if let Ok(i) = first.binary_search_by_key(&op, |o| o.id) {
            return Some(&first[i]);
        }
        if !matches!(self, Kind::MemoryCopy | Kind::MemoryFill) {
            return None;
        }
        let ops = self.operations();
        ops.binary_search_by_key(&op, |o| o.id).ok().map(|i| &ops[i])
    }

    /// Whether this kind's operations are API functions whose payload is [`ApiCallPayload`].
    pub fn is_api(self) -> bool {
        matches!(self, Kind::UrApi | Kind::OpenclApi | Kind::CudaRuntimeApi | Kind::CudaDriverApi)
    }

    /// Whether this kind's records are device activity (work a queue executes, with device
    /// start/end when known): kernel dispatches, copies and fills (a `SYNC` barrier enqueued on
    /// a queue is device activity too: operation `sync_op::BARRIER` or `MARKER` with phase
    /// `Complete`).
    pub fn is_device_activity(self) -> bool {
        matches!(self, Kind::KernelDispatch | Kind::MemoryCopy | Kind::MemoryFill)
    }

    /// Largest operation id + 1 (sizes the per-service operation filter).
    pub fn operation_bound(self) -> u32 {
        self.operations().last().map_or(0, |o| o.id + 1)
    }
}

/// How an argument's raw `u64` is turned into text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ArgFormat {
    /// Decimal, unsigned, masked to the argument's size.
    Unsigned = 0,
    /// Decimal, sign-extended from the argument's size.
    Signed = 1,
    /// `0x…` hexadecimal (flags, bit fields).
    Hex = 2,
    /// A pointer or opaque handle: `0x…`, `nullptr` for 0.
    Pointer = 3,
    /// `true` / `false`.
    Bool = 4,
    /// A `const char*`: printed quoted when dereferencing is allowed, else as a pointer.
    CString = 5,
    /// An enumeration: decimal.
    Enum = 6,
}

/// One parameter of an operation: its name, C type and size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgDescriptor {
    pub name: &'static str,
    pub type_name: &'static str,
    pub size: u8,
    pub format: ArgFormat,
}

impl ArgDescriptor {
    /// The number of `*` in the C type: the argument's indirection count.
    pub fn indirection_count(&self) -> i32 {
        self.type_name.bytes().filter(|&b| b == b'*').count() as i32
    }
}

/// One operation of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation {
    pub id: u32,
    pub name: &'static str,
    pub args: &'static [ArgDescriptor],
}

/// Why [`register_kind_operations`] refused a table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    #[error("kind {0:?} has built-in operations; only API kinds take a backend's table")]
    BuiltIn(Kind),
    #[error("kind {0:?} already has a registered operation table")]
    AlreadyRegistered(Kind),
    #[error("operation table for {kind:?} is not strictly sorted by id at index {index}")]
    Unsorted { kind: Kind, index: usize },
}

static REGISTERED: [OnceLock<&'static [Operation]>; KIND_COUNT] = [const { OnceLock::new() }; KIND_COUNT];

/// Installs a backend's operation table for an API kind (once per process). The table must be
/// sorted by strictly increasing id. Call it before configuring services for the kind, so that
/// operation filters know the kind's id range.
pub fn register_kind_operations(kind: Kind, ops: &'static [Operation]) -> Result<(), RegisterError> {
    if !kind.is_api() {
        return Err(RegisterError::BuiltIn(kind));
    }
    if let Some(index) = ops.windows(2).position(|w| w[0].id >= w[1].id) {
        return Err(RegisterError::Unsorted { kind, index: index + 1 });
    }
    REGISTERED[kind.index()].set(ops).map_err(|_| RegisterError::AlreadyRegistered(kind))
}

macro_rules! arg {
    ($name:literal, $ty:literal, $size:literal, $fmt:ident) => {
        ArgDescriptor { name: $name, type_name: $ty, size: $size, format: ArgFormat::$fmt }
    };
}

/// Fields of [`crate::payload::QueuePayload`].
const QUEUE_ARGS: &[ArgDescriptor] = &[
    arg!("queue", "offtrace_queue_id_t", 8, Pointer),
    arg!("device", "offtrace_device_id_t", 8, Pointer),
    arg!("context", "offtrace_context_id_t", 8, Pointer),
    arg!("flags", "uint64_t", 8, Hex),
];
/// Fields of [`crate::payload::KernelDispatchPayload`] that are iterated (the fixed part).
const KERNEL_ARGS: &[ArgDescriptor] = &[
    arg!("queue", "offtrace_queue_id_t", 8, Pointer),
    arg!("kernel", "offtrace_kernel_id_t", 8, Pointer),
    arg!("kernel_name", "const char*", 8, CString),
    arg!("work_dim", "uint32_t", 4, Unsigned),
    arg!("global_size_x", "size_t", 8, Unsigned),
    arg!("global_size_y", "size_t", 8, Unsigned),
    arg!("global_size_z", "size_t", 8, Unsigned),
    arg!("local_size_x", "size_t", 8, Unsigned),
    arg!("local_size_y", "size_t", 8, Unsigned),
    arg!("local_size_z", "size_t", 8, Unsigned),
];
const COPY_ARGS: &[ArgDescriptor] = &[
    arg!("queue", "offtrace_queue_id_t", 8, Pointer),
    arg!("dst", "void*", 8, Pointer),
    arg!("src", "const void*", 8, Pointer),
    arg!("size", "size_t", 8, Unsigned),
];
const FILL_ARGS: &[ArgDescriptor] = &[
    arg!("queue", "offtrace_queue_id_t", 8, Pointer),
    arg!("dst", "void*", 8, Pointer),
    arg!("pattern", "uint64_t", 8, Hex),
    arg!("pattern_size", "size_t", 8, Unsigned),
    arg!("size", "size_t", 8, Unsigned),
];
const ALLOC_ARGS: &[ArgDescriptor] = &[
    arg!("ptr", "void*", 8, Pointer),
    arg!("size", "size_t", 8, Unsigned),
    arg!("type", "offtrace_memory_type_t", 4, Unsigned),
    arg!("device", "offtrace_device_id_t", 8, Pointer),
];
const GRAPH_ARGS: &[ArgDescriptor] = &[
    arg!("node", "uint64_t", 8, Hex),
    arg!("source", "uint64_t", 8, Hex),
    arg!("target", "uint64_t", 8, Hex),
    arg!("name", "const char*", 8, CString),
    arg!("event", "offtrace_event_id_t", 8, Pointer),
];
const SYNC_ARGS: &[ArgDescriptor] =
    &[arg!("object", "void*", 8, Pointer), arg!("event_count", "uint32_t", 4, Unsigned)];
const DEVICE_ARGS: &[ArgDescriptor] = &[
    arg!("handle", "uint64_t", 8, Pointer),
    arg!("parent", "uint64_t", 8, Pointer),
    arg!("name", "const char*", 8, CString),
    arg!("device_type", "offtrace_device_type_t", 4, Enum),
];
const COUNTER_ARGS: &[ArgDescriptor] = &[
    arg!("counter", "uint64_t", 8, Unsigned),
    arg!("device", "offtrace_device_id_t", 8, Pointer),
    arg!("value", "uint64_t", 8, Hex),
    arg!("name", "const char*", 8, CString),
    arg!("unit", "const char*", 8, CString),
];
const CODE_OBJECT_ARGS: &[ArgDescriptor] = &[
    arg!("handle", "void*", 8, Pointer),
    arg!("program", "uint64_t", 8, Pointer),
    arg!("name", "const char*", 8, CString),
    arg!("binary_size", "size_t", 8, Unsigned),
];
/// Fields of [`crate::payload::XptiPayload`]: the subscriber callback's arguments, plus the stream.
const XPTI_ARGS: &[ArgDescriptor] = &[
    arg!("stream", "const char*", 8, CString),
    arg!("stream_id", "uint8_t", 8, Unsigned),
    arg!("parent", "xpti::trace_event_data_t*", 8, Pointer),
    arg!("event", "xpti::trace_event_data_t*", 8, Pointer),
    arg!("instance", "uint64_t", 8, Unsigned),
    arg!("user_data", "const void*", 8, Pointer),
];
const MARKER_ARGS: &[ArgDescriptor] =
    &[arg!("message", "const char*", 8, CString), arg!("range_id", "uint64_t", 8, Unsigned)];

macro_rules! ops {
    ($args:ident: $($id:literal => $name:literal),* $(,)?) => {
        &[$(Operation { id: $id, name: $name, args: $args }),*]
    };
}

/// Operation ids of `QUEUE` (`sycl_queue` is its former name).
pub mod queue_op {
    pub const CREATE: u32 = 0;
    pub const DESTROY: u32 = 1;
    pub const SUBMIT: u32 = 2;
}
pub use queue_op as sycl_queue;
/// The bits of `QueuePayload::flags` (the trace's `offtrace_format::queue_flags`, same values).
pub mod queue_flags {
    /// In-order execution (commands run one after another).
    pub const IN_ORDER: u64 = 1;
    /// The program asked for profiling results (OpenCL `CL_QUEUE_PROFILING_ENABLE`); the
    /// OpenCL layer turns profiling on for every queue, so this says what the program wanted.
    pub const PROFILING: u64 = 1 << 1;
    /// Priority the program asked for (OpenCL `CL_QUEUE_PRIORITY_KHR` high / low; neither:
    /// the default, or medium).
    pub const PRIORITY_HIGH: u64 = 1 << 2;
    pub const PRIORITY_LOW: u64 = 1 << 3;
    /// A device-side queue (OpenCL `CL_QUEUE_ON_DEVICE`).
    pub const ON_DEVICE: u64 = 1 << 4;
    /// The program configured `cl_codeplay_performance_counters` on it.
    pub const PERFORMANCE_COUNTERS: u64 = 1 << 5;
}
/// Operation ids of `KERNEL_DISPATCH`.
pub mod kernel_dispatch {
    pub const LAUNCH: u32 = 0;
}
/// Operation ids of `MEMORY_COPY`.
pub mod memory_copy {
    pub const USM_MEMCPY: u32 = 0;
    pub const BUFFER_READ: u32 = 1;
    pub const BUFFER_WRITE: u32 = 2;
    pub const BUFFER_COPY: u32 = 3;
    /// A map of a buffer, image or SVM region for the host (OpenCL `clEnqueueMap*`): the
    /// runtime may copy the region to the host.
    pub const MAP: u32 = 4;
    /// The unmap that ends a map (OpenCL `clEnqueue{UnmapMemObject,SVMUnmap}`): the runtime may
    /// copy the region back to the device.
    pub const UNMAP: u32 = 5;
    /// OpenCL rectangular copies (`clEnqueue{Read,Write,Copy}BufferRect`): the region's bytes.
    pub const BUFFER_READ_RECT: u32 = 6;
    pub const BUFFER_WRITE_RECT: u32 = 7;
    pub const BUFFER_COPY_RECT: u32 = 8;
    /// OpenCL image commands (`clEnqueue{Read,Write,Copy}Image`,
    /// `clEnqueueCopy{ImageToBuffer,BufferToImage}`): the region's pixels times the image's
    /// element size.
    pub const IMAGE_READ: u32 = 9;
    pub const IMAGE_WRITE: u32 = 10;
    pub const IMAGE_COPY: u32 = 11;
    pub const IMAGE_TO_BUFFER: u32 = 12;
    pub const BUFFER_TO_IMAGE: u32 = 13;
    /// A map of an image region (`clEnqueueMapImage`); its unmap is an [`UNMAP`].
    pub const IMAGE_MAP: u32 = 14;
    /// The first CUDA copy: CUDA users know a copy by its CUPTI copy kind and source and
    /// destination memory kinds, named as torch.profiler (Kineto) names them: `Memcpy HtoD
    /// (Pageable -> Device)`. See [`cuda`].
    pub const CUDA_FIRST: u32 = 0x100;

    /// The operation of a CUDA copy of CUPTI's `CUpti_ActivityMemcpyKind` `copy_kind` from
    /// memory of `CUpti_ActivityMemoryKind` `src` to `dst` (values out of range read as 0,
    /// unknown).
    pub fn cuda(copy_kind: u32, src: u32, dst: u32) -> u32 {
        let k = |v: u32, n: usize| if (v as usize) < n { v } else { 0 };
        CUDA_FIRST
            + k(copy_kind, super::CUDA_COPY_KINDS.len()) * 64
            + k(src, super::CUDA_MEMORY_KINDS.len()) * 8
            + k(dst, super::CUDA_MEMORY_KINDS.len())
    }
}
/// Operation ids of `MEMORY_FILL`.
pub mod memory_fill {
    pub const USM_FILL: u32 = 0;
    pub const BUFFER_FILL: u32 = 1;
    /// `clEnqueueFillImage`: the region's pixels times the image's element size.
    pub const IMAGE_FILL: u32 = 2;
    /// The first CUDA memset, named as torch.profiler names it: `Memset (Device)`. See [`cuda`].
    pub const CUDA_FIRST: u32 = 0x100;

    /// The operation of a CUDA memset of memory of CUPTI's `CUpti_ActivityMemoryKind` `kind`.
    pub fn cuda(kind: u32) -> u32 {
        CUDA_FIRST + if (kind as usize) < super::CUDA_MEMORY_KINDS.len() { kind } else { 0 }
    }
}

/// `CUpti_ActivityMemcpyKind` 0..=10 as Kineto's `memcpyKindString` spells them.
const CUDA_COPY_KINDS: [&str; 11] =
    ["<unknown>", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"];
/// `CUpti_ActivityMemoryKind` 0..=7 as Kineto's `memoryKindString` spells them.
const CUDA_MEMORY_KINDS: [&str; 8] =
    ["Unknown", "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static"];

/// `MEMORY_COPY`'s operations: the SYCL/OpenCL ones, then one per CUDA copy kind and memory
/// kinds (built once; a trace defines only the operations it uses).
fn memory_copy_ops() -> &'static [Operation] {
    static OPS: OnceLock<&'static [Operation]> = OnceLock::new();
    OPS.get_or_init(|| {
        let mut ops = MEMORY_COPY_OPS.to_vec();
        for (c, copy) in CUDA_COPY_KINDS.iter().enumerate() {
            for (s, src) in CUDA_MEMORY_KINDS.iter().enumerate() {
                for (d, dst) in CUDA_MEMORY_KINDS.iter().enumerate() {
                    let name: &'static str = Box::leak(format!("Memcpy {copy} ({src} -> {dst})").into_boxed_str());
                    let id = memory_copy::cuda(c as u32, s as u32, d as u32);
                    ops.push(Operation { id, name, args: COPY_ARGS });
                }
            }
        }
        Box::leak(ops.into_boxed_slice())
    })
}

/// `MEMORY_FILL`'s operations: the SYCL/OpenCL ones, then one per CUDA memory kind.
fn memory_fill_ops() -> &'static [Operation] {
    static OPS: OnceLock<&'static [Operation]> = OnceLock::new();
    OPS.get_or_init(|| {
        let mut ops = MEMORY_FILL_OPS.to_vec();
        for (k, kind) in CUDA_MEMORY_KINDS.iter().enumerate() {
            let name: &'static str = Box::leak(format!("Memset ({kind})").into_boxed_str());
            ops.push(Operation { id: memory_fill::cuda(k as u32), name, args: FILL_ARGS });
        }
        Box::leak(ops.into_boxed_slice())
    })
}
/// Operation ids of `MEMORY_ALLOC`.
pub mod memory_alloc {
    pub const ALLOC: u32 = 0;
    pub const FREE: u32 = 1;
    /// A part of a live allocation with a handle of its own (an OpenCL sub-buffer): its bytes
    /// are its parent's, so it adds nothing to live memory; its free is a `FREE` of its handle.
    pub const SUB_ALLOC: u32 = 2;
}
/// Operation ids of `TASK_GRAPH`.
pub mod task_graph {
    pub const NODE_CREATE: u32 = 0;
    pub const EDGE_CREATE: u32 = 1;
    pub const TASK: u32 = 2;
    pub const SIGNAL: u32 = 3;
}
/// Operation ids of `SYNC`.
pub mod sync_op {
    pub const WAIT: u32 = 0;
    /// A barrier enqueued on a queue: later commands wait for it (device activity).
    pub const BARRIER: u32 = 1;
    /// A marker enqueued on a queue (OpenCL's `clEnqueueMarker*`): completes when the commands
    /// it names have, without holding later ones back (device activity, as a barrier).
    pub const MARKER: u32 = 2;
}
/// Operation ids of `CODE_OBJECT` (phase LOAD on create/build, UNLOAD on release).
pub mod code_object {
    pub const PROGRAM: u32 = 0;
    pub const PROGRAM_BUILD: u32 = 1;
    pub const KERNEL: u32 = 2;
}
/// Operation ids of `MARKER`.
pub mod marker_op {
    pub const MARK: u32 = 0;
    pub const RANGE: u32 = 1;
}
/// Operation ids of `DEVICE`.
pub mod device_op {
    /// A device: handle, parent = its context or platform (0 = none), name, type.
    pub const DEVICE: u32 = 0;
    /// A context: handle, parent = its first device (0 = none).
    pub const CONTEXT: u32 = 1;
}
/// Operation ids of `COUNTER`.
pub mod counter_op {
    /// A counter's definition: id, device, name, unit, value type (in `value`).
    pub const DEFINE: u32 = 0;
    /// One sample: id, device, value (bits per the definition's value type).
    pub const SAMPLE: u32 = 1;
}

const QUEUE_OPS: &[Operation] = ops!(QUEUE_ARGS: 0 => "queue_create", 1 => "queue_destroy", 2 => "submit");
const DEVICE_OPS: &[Operation] = ops!(DEVICE_ARGS: 0 => "device", 1 => "context");
const COUNTER_OPS: &[Operation] = ops!(COUNTER_ARGS: 0 => "define", 1 => "sample");
const KERNEL_DISPATCH_OPS: &[Operation] = ops!(KERNEL_ARGS: 0 => "kernel_launch");
const MEMORY_COPY_OPS: &[Operation] = ops!(COPY_ARGS: 0 => "usm_memcpy", 1 => "buffer_read", 2 => "buffer_write", 3 => "buffer_copy", 4 => "map", 5 => "unmap",
    6 => "buffer_read_rect", 7 => "buffer_write_rect", 8 => "buffer_copy_rect", 9 => "image_read", 10 => "image_write",
    11 => "image_copy", 12 => "image_to_buffer", 13 => "buffer_to_image", 14 => "image_map");
const MEMORY_FILL_OPS: &[Operation] = ops!(FILL_ARGS: 0 => "usm_fill", 1 => "buffer_fill", 2 => "image_fill");
const MEMORY_ALLOC_OPS: &[Operation] = ops!(ALLOC_ARGS: 0 => "alloc", 1 => "free", 2 => "sub_alloc");
const TASK_GRAPH_OPS: &[Operation] =
    ops!(GRAPH_ARGS: 0 => "node_create", 1 => "edge_create", 2 => "task", 3 => "signal");
const SYNC_OPS: &[Operation] = ops!(SYNC_ARGS: 0 => "wait", 1 => "barrier", 2 => "marker");
const CODE_OBJECT_OPS: &[Operation] = ops!(CODE_OBJECT_ARGS: 0 => "program", 1 => "program_build", 2 => "kernel");
const MARKER_OPS: &[Operation] = ops!(MARKER_ARGS: 0 => "mark", 1 => "range");
/// The named `trace_point_type_t` values of the XPTI headers (2026.2), with their header names.
const XPTI_OPS: &[Operation] = ops!(XPTI_ARGS:
    2 => "graph_create", 4 => "node_create", 6 => "edge_create", 8 => "region_begin", 9 => "region_end",
    10 => "task_begin", 11 => "task_end", 12 => "barrier_begin", 13 => "barrier_end", 14 => "lock_begin",
    15 => "lock_end", 16 => "signal", 18 => "transfer_begin", 19 => "transfer_end", 20 => "thread_begin",
    21 => "thread_end", 22 => "wait_begin", 23 => "wait_end", 24 => "function_begin", 25 => "function_end",
    26 => "metadata", 28 => "function_with_args_begin", 29 => "function_with_args_end",
    32 => "mem_alloc_begin", 33 => "mem_alloc_end", 34 => "mem_release_begin", 35 => "mem_release_end",
    36 => "offload_alloc_memory_object_construct", 37 => "offload_alloc_memory_object_destruct",
    38 => "offload_alloc_memory_object_associate", 39 => "offload_alloc_memory_object_release",
    40 => "offload_alloc_accessor", 42 => "queue_create", 43 => "queue_destroy", 126 => "diagnostics",
);
/// Operation ids of `XPTI`: the trace point type (`trace_point_type_t`); the named ones are in
/// the kind's operation table.
pub mod xpti_op {
    pub const FUNCTION_WITH_ARGS_BEGIN: u32 = 28;
    pub const FUNCTION_WITH_ARGS_END: u32 = 29;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_are_named() {
        assert_eq!(Kind::from_u32(0), None);
        assert_eq!(Kind::from_u32(KIND_COUNT as u32), None);
        for k in Kind::ALL {
            assert_eq!(Kind::from_u32(k as u32), Some(k));
            assert!(!k.name().is_empty());
        }
    }

    #[test]
    fn builtin_tables_are_sorted_and_refuse_registration() {
        for k in Kind::ALL {
            assert!(k.operations().windows(2).all(|w| w[0].id < w[1].id), "{k:?}");
        }
        assert_eq!(register_kind_operations(Kind::Marker, &[]), Err(RegisterError::BuiltIn(Kind::Marker)));
        assert!(Kind::API.iter().all(|k| k.is_api()));
        assert_eq!(Kind::ALL.iter().filter(|k| k.is_api()).count(), Kind::API.len());
        assert_eq!(Kind::TaskGraph.operation(task_graph::SIGNAL).map(|o| o.name), Some("signal"));
        assert_eq!(Kind::TaskGraph.operation(99), None);
    }

    #[test]
    fn cuda_copies_and_memsets_are_named_as_torch_profiler_names_them() {
        let name = |k: Kind, op: u32| k.operation(op).map(|o| o.name);
        // CUPTI: HTOD = 1, PAGEABLE = 1, PINNED = 2, DEVICE = 3; DTOD = 8; PTOP = 10.
        assert_eq!(name(Kind::MemoryCopy, memory_copy::cuda(1, 1, 3)), Some("Memcpy HtoD (Pageable -> Device)"));
        assert_eq!(name(Kind::MemoryCopy, memory_copy::cuda(2, 3, 2)), Some("Memcpy DtoH (Device -> Pinned)"));
        assert_eq!(name(Kind::MemoryCopy, memory_copy::cuda(8, 3, 3)), Some("Memcpy DtoD (Device -> Device)"));
        assert_eq!(name(Kind::MemoryCopy, memory_copy::cuda(10, 3, 3)), Some("Memcpy PtoP (Device -> Device)"));
        assert_eq!(name(Kind::MemoryCopy, memory_copy::cuda(99, 99, 3)), Some("Memcpy <unknown> (Unknown -> Device)"));
        assert_eq!(name(Kind::MemoryFill, memory_fill::cuda(3)), Some("Memset (Device)"));
        assert_eq!(name(Kind::MemoryFill, memory_fill::cuda(5)), Some("Memset (Managed)"));
        assert_eq!(name(Kind::MemoryCopy, memory_copy::USM_MEMCPY), Some("usm_memcpy"), "SYCL keeps its names");
        assert_eq!(name(Kind::MemoryFill, memory_fill::USM_FILL), Some("usm_fill"));
    }

    /// A second and a third backend register their tables beside UR's; each kind takes one.
    #[test]
    fn several_backends_register_side_by_side() {
        const OPS: &[Operation] = &[
            Operation { id: 1, name: "clFinish", args: &[] },
            Operation { id: 5, name: "clEnqueueNDRangeKernel", args: &[] },
        ];
        const CUDA: &[Operation] = &[Operation { id: 22, name: "cudaMemcpy", args: &[] }];
        assert_eq!(register_kind_operations(Kind::OpenclApi, OPS), Ok(()));
        assert_eq!(register_kind_operations(Kind::CudaRuntimeApi, CUDA), Ok(()));
        assert_eq!(
            register_kind_operations(Kind::OpenclApi, OPS),
            Err(RegisterError::AlreadyRegistered(Kind::OpenclApi))
        );
        assert_eq!(Kind::OpenclApi.operation(5).map(|o| o.name), Some("clEnqueueNDRangeKernel"));
        assert_eq!(Kind::CudaRuntimeApi.operation_bound(), 23);
        assert!(Kind::CudaDriverApi.operations().is_empty());
        const UNSORTED: &[Operation] =
            &[Operation { id: 5, name: "cuLaunchKernel", args: &[] }, Operation { id: 1, name: "cuInit", args: &[] }];
        let unsorted: &'static [Operation] = UNSORTED;
        assert_eq!(
            register_kind_operations(Kind::CudaDriverApi, unsorted),
            Err(RegisterError::Unsorted { kind: Kind::CudaDriverApi, index: 1 })
        );
    }

    #[test]
    fn indirection_counts_stars() {
        assert_eq!(arg!("p", "void**", 8, Pointer).indirection_count(), 2);
        assert_eq!(arg!("n", "size_t", 8, Unsigned).indirection_count(), 0);
    }
}
