//! Kinds (tracing domains), their operations, and the argument descriptors used to decode them.
//!
//! A [`Kind`] is a domain such as `UR_API` or `KERNEL_DISPATCH`; an operation is one member of a
//! kind (for an API kind: one function, identified by the runtime's own function id). The
//! built-in kinds describe their operations here. An API kind's operations come from its backend:
//! the backend calls [`register_kind_operations`] once at startup with a `'static` table (for
//! `UR_API`: generated from `ur_api.h` in `offtrace-xpti`), so this crate never depends on a
//! backend. Lookups are cold (names, argument iteration); nothing here is on the record path.

use std::sync::OnceLock;

/// A tracing domain. The numeric values are the C API's `offtrace_tracing_kind_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum Kind {
    /// Every Unified Runtime function; operation = `ur_function_t`.
    UrApi = 1,
    /// SYCL queue creation, destruction and command-group submission.
    SyclQueue = 2,
    /// A kernel enqueued on a device.
    KernelDispatch = 3,
    MemoryCopy = 4,
    MemoryFill = 5,
    /// USM/buffer allocation and release; feeds the live allocation table.
    MemoryAlloc = 6,
    /// The asynchronous task graph: nodes, edges, task begin/end, signals.
    TaskGraph = 7,
    /// Waits and barriers.
    Sync = 8,
    /// Programs and kernels, reported as load/unload.
    CodeObject = 9,
    /// User ranges and marks from the marker API.
    Marker = 10,
    /// Every raw XPTI notification of the streams the backend subscribes (operation = the
    /// trace point type): what the runtime said, before any interpretation. The recorder of
    /// `offtrace record` is a client of this kind.
    Xpti = 11,
    /// Every OpenCL function (ICD dispatch table + extensions); operation = the OpenCL backend's
    /// function id (its dispatch slot).
    OpenclApi = 12,
}

/// Number of kind values including the unused 0; arrays indexed by kind have this length.
pub const KIND_COUNT: usize = 13;

impl Kind {
    pub const ALL: [Kind; KIND_COUNT - 1] = [
        Kind::UrApi,
        Kind::SyclQueue,
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
    ];

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
            Kind::SyclQueue => "SYCL_QUEUE",
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
        }
    }

    /// This kind's operations, sorted by id; empty for an API kind whose backend has not
    /// registered its table yet.
    pub fn operations(self) -> &'static [Operation] {
        match self {
            Kind::UrApi | Kind::OpenclApi => REGISTERED[self.index()].get().copied().unwrap_or(&[]),
            Kind::SyclQueue => SYCL_QUEUE_OPS,
            Kind::KernelDispatch => KERNEL_DISPATCH_OPS,
            Kind::MemoryCopy => MEMORY_COPY_OPS,
            Kind::MemoryFill => MEMORY_FILL_OPS,
            Kind::MemoryAlloc => MEMORY_ALLOC_OPS,
            Kind::TaskGraph => TASK_GRAPH_OPS,
            Kind::Sync => SYNC_OPS,
            Kind::CodeObject => CODE_OBJECT_OPS,
            Kind::Marker => MARKER_OPS,
            Kind::Xpti => XPTI_OPS,
        }
    }

    /// The operation with id `op`, if this kind has one.
    pub fn operation(self, op: u32) -> Option<&'static Operation> {
        let ops = self.operations();
        ops.binary_search_by_key(&op, |o| o.id).ok().map(|i| &ops[i])
    }

    /// Whether this kind's operations are API functions whose payload is [`ApiCallPayload`].
    pub fn is_api(self) -> bool {
        matches!(self, Kind::UrApi | Kind::OpenclApi)
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
    arg!("queue", "ur_queue_handle_t", 8, Pointer),
    arg!("device", "ur_device_handle_t", 8, Pointer),
    arg!("context", "ur_context_handle_t", 8, Pointer),
    arg!("flags", "uint64_t", 8, Hex),
];
/// Fields of [`crate::payload::KernelDispatchPayload`] that are iterated (the fixed part).
const KERNEL_ARGS: &[ArgDescriptor] = &[
    arg!("queue", "ur_queue_handle_t", 8, Pointer),
    arg!("kernel", "ur_kernel_handle_t", 8, Pointer),
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
    arg!("queue", "ur_queue_handle_t", 8, Pointer),
    arg!("dst", "void*", 8, Pointer),
    arg!("src", "const void*", 8, Pointer),
    arg!("size", "size_t", 8, Unsigned),
];
const FILL_ARGS: &[ArgDescriptor] = &[
    arg!("queue", "ur_queue_handle_t", 8, Pointer),
    arg!("dst", "void*", 8, Pointer),
    arg!("pattern", "uint64_t", 8, Hex),
    arg!("pattern_size", "size_t", 8, Unsigned),
    arg!("size", "size_t", 8, Unsigned),
];
const ALLOC_ARGS: &[ArgDescriptor] = &[
    arg!("ptr", "void*", 8, Pointer),
    arg!("size", "size_t", 8, Unsigned),
    arg!("type", "offtrace_memory_type_t", 4, Unsigned),
    arg!("device", "ur_device_handle_t", 8, Pointer),
];
const GRAPH_ARGS: &[ArgDescriptor] = &[
    arg!("node", "uint64_t", 8, Hex),
    arg!("source", "uint64_t", 8, Hex),
    arg!("target", "uint64_t", 8, Hex),
    arg!("name", "const char*", 8, CString),
    arg!("ur_event", "ur_event_handle_t", 8, Pointer),
];
const SYNC_ARGS: &[ArgDescriptor] =
    &[arg!("object", "void*", 8, Pointer), arg!("event_count", "uint32_t", 4, Unsigned)];
const CODE_OBJECT_ARGS: &[ArgDescriptor] = &[
    arg!("handle", "void*", 8, Pointer),
    arg!("program", "ur_program_handle_t", 8, Pointer),
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

/// Operation ids of `SYCL_QUEUE`.
pub mod sycl_queue {
    pub const CREATE: u32 = 0;
    pub const DESTROY: u32 = 1;
    pub const SUBMIT: u32 = 2;
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
}
/// Operation ids of `MEMORY_FILL`.
pub mod memory_fill {
    pub const USM_FILL: u32 = 0;
    pub const BUFFER_FILL: u32 = 1;
}
/// Operation ids of `MEMORY_ALLOC`.
pub mod memory_alloc {
    pub const ALLOC: u32 = 0;
    pub const FREE: u32 = 1;
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
    pub const BARRIER: u32 = 1;
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

const SYCL_QUEUE_OPS: &[Operation] = ops!(QUEUE_ARGS: 0 => "queue_create", 1 => "queue_destroy", 2 => "submit");
const KERNEL_DISPATCH_OPS: &[Operation] = ops!(KERNEL_ARGS: 0 => "kernel_launch");
const MEMORY_COPY_OPS: &[Operation] =
    ops!(COPY_ARGS: 0 => "usm_memcpy", 1 => "buffer_read", 2 => "buffer_write", 3 => "buffer_copy");
const MEMORY_FILL_OPS: &[Operation] = ops!(FILL_ARGS: 0 => "usm_fill", 1 => "buffer_fill");
const MEMORY_ALLOC_OPS: &[Operation] = ops!(ALLOC_ARGS: 0 => "alloc", 1 => "free");
const TASK_GRAPH_OPS: &[Operation] =
    ops!(GRAPH_ARGS: 0 => "node_create", 1 => "edge_create", 2 => "task", 3 => "signal");
const SYNC_OPS: &[Operation] = ops!(SYNC_ARGS: 0 => "wait", 1 => "barrier");
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
        assert_eq!(Kind::TaskGraph.operation(task_graph::SIGNAL).map(|o| o.name), Some("signal"));
        assert_eq!(Kind::TaskGraph.operation(99), None);
    }

    #[test]
    fn indirection_counts_stars() {
        assert_eq!(arg!("p", "void**", 8, Pointer).indirection_count(), 2);
        assert_eq!(arg!("n", "size_t", 8, Unsigned).indirection_count(), 0);
    }
}
