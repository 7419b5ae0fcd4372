//! Names of XPTI trace point types and the few UR function parameters the analysis reads.
//!
//! A small copy of the XPTI header names keeps this crate free of the FFI crate; the values are
//! the `trace_point_type_t` enumerators of XPTI 2026.2 (see `offtrace-xpti`'s `abi::trace_type`).

pub mod tt {
    pub const GRAPH_CREATE: u16 = 2;
    pub const NODE_CREATE: u16 = 4;
    pub const EDGE_CREATE: u16 = 6;
    pub const TASK_BEGIN: u16 = 10;
    pub const TASK_END: u16 = 11;
    pub const SIGNAL: u16 = 16;
    pub const WAIT_BEGIN: u16 = 22;
    pub const WAIT_END: u16 = 23;
    pub const FUNCTION_BEGIN: u16 = 24;
    pub const FUNCTION_END: u16 = 25;
    pub const FUNCTION_WITH_ARGS_BEGIN: u16 = 28;
    pub const FUNCTION_WITH_ARGS_END: u16 = 29;
    pub const MEM_ALLOC_BEGIN: u16 = 32;
    pub const MEM_ALLOC_END: u16 = 33;
    pub const MEM_RELEASE_BEGIN: u16 = 34;
    pub const MEM_RELEASE_END: u16 = 35;
    pub const MEMORY_OBJECT_CONSTRUCT: u16 = 36;
    pub const MEMORY_OBJECT_DESTRUCT: u16 = 37;
    pub const MEMORY_OBJECT_ASSOCIATE: u16 = 38;
    pub const MEMORY_OBJECT_RELEASE: u16 = 39;
    pub const ACCESSOR: u16 = 40;
    pub const QUEUE_CREATE: u16 = 42;
    pub const QUEUE_DESTROY: u16 = 43;
}

const NAMED: &[(u16, &str)] = &[
    (0, "unknown_type"),
    (2, "graph_create"),
    (4, "node_create"),
    (6, "edge_create"),
    (8, "region_begin"),
    (9, "region_end"),
    (10, "task_begin"),
    (11, "task_end"),
    (12, "barrier_begin"),
    (13, "barrier_end"),
    (14, "lock_begin"),
    (15, "lock_end"),
    (16, "signal"),
    (18, "transfer_begin"),
    (19, "transfer_end"),
    (20, "thread_begin"),
    (21, "thread_end"),
    (22, "wait_begin"),
    (23, "wait_end"),
    (24, "function_begin"),
    (25, "function_end"),
    (26, "metadata"),
    (28, "function_with_args_begin"),
    (29, "function_with_args_end"),
    (32, "mem_alloc_begin"),
    (33, "mem_alloc_end"),
    (34, "mem_release_begin"),
    (35, "mem_release_end"),
    (36, "offload_alloc_memory_object_construct"),
    (37, "offload_alloc_memory_object_destruct"),
    (38, "offload_alloc_memory_object_associate"),
    (39, "offload_alloc_memory_object_release"),
    (40, "offload_alloc_accessor"),
    (42, "queue_create"),
    (43, "queue_destroy"),
    (126, "diagnostics"),
];

/// The XPTI header name of a trace point type, `type_<n>` for anything else.
pub fn trace_type_name(trace_type: u16) -> std::borrow::Cow<'static, str> {
    match NAMED.iter().find(|(v, _)| *v == trace_type) {
        Some((_, n)) => std::borrow::Cow::Borrowed(n),
        None => std::borrow::Cow::Owned(format!("type_{trace_type}")),
    }
}

/// Is this trace type the opening half of a begin/end pair?
pub fn is_begin(trace_type: u16) -> bool {
    matches!(trace_type, 8 | 10 | 12 | 14 | 18 | 20 | 22 | 24 | 28 | 32 | 34)
}

/// Is this trace type the closing half of a begin/end pair?
pub fn is_end(trace_type: u16) -> bool {
    matches!(trace_type, 9 | 11 | 13 | 15 | 19 | 21 | 23 | 25 | 29 | 33 | 35)
}

/// The role a stream plays, by its name. The debug streams carry the same traffic as their
/// normal twins (the runtime sends to one or the other), so they are read as the same role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamRole {
    Sycl,
    UrCall,
    MemAlloc,
    Buffer,
    Other,
}

impl StreamRole {
    pub fn from_name(name: &str) -> Self {
        match name {
            "sycl" | "sycl.debug" => Self::Sycl,
            "ur.call" | "ur.call.debug" => Self::UrCall,
            "sycl.experimental.mem_alloc" => Self::MemAlloc,
            "sycl.experimental.buffer" => Self::Buffer,
            _ => Self::Other,
        }
    }
}

/// `ur_profiling_info_t` values read from `urEventGetProfilingInfo`.
pub mod profiling_info {
    pub const COMMAND_QUEUED: u64 = 0;
    pub const COMMAND_SUBMIT: u64 = 1;
    pub const COMMAND_START: u64 = 2;
    pub const COMMAND_END: u64 = 3;
    pub const COMMAND_COMPLETE: u64 = 4;
}

/// Where a UR function keeps the arguments the analysis reads (0-based parameter indices in
/// the `ur_<function>_params_t` order of UR 0.12). Functions not listed: nothing is read.
#[derive(Debug, Clone, Copy, Default)]
pub struct UrParams {
    /// The byte count of a copy, fill, read, write or allocation.
    pub size: Option<usize>,
    /// `phEvent` (an output) of an enqueue.
    pub ph_event: Option<usize>,
    /// `ppMem` (an output) of a USM allocation.
    pub pp_mem: Option<usize>,
    /// The memory operation this function performs, for the memory section.
    pub mem_op: Option<&'static str>,
    /// USM allocation kind.
    pub usm_kind: Option<&'static str>,
}

pub fn ur_params(name: &str) -> UrParams {
    let p = |size, ph_event, mem_op| UrParams { size, ph_event, pp_mem: None, mem_op, usm_kind: None };
    match name {
        "urEnqueueUSMMemcpy" => p(Some(4), Some(7), Some("usm_memcpy")),
        "urEnqueueUSMFill" => p(Some(4), Some(7), Some("usm_fill")),
        "urEnqueueMemBufferRead" => p(Some(4), Some(8), Some("buffer_read")),
        "urEnqueueMemBufferWrite" => p(Some(4), Some(8), Some("buffer_write")),
        "urEnqueueMemBufferCopy" => p(Some(5), Some(8), Some("buffer_copy")),
        "urEnqueueMemBufferFill" => p(Some(5), Some(8), Some("buffer_fill")),
        "urUSMDeviceAlloc" => {
            UrParams { size: Some(4), pp_mem: Some(5), usm_kind: Some("device"), ..Default::default() }
        }
        "urUSMSharedAlloc" => {
            UrParams { size: Some(4), pp_mem: Some(5), usm_kind: Some("shared"), ..Default::default() }
        }
        "urUSMHostAlloc" => UrParams { size: Some(3), pp_mem: Some(4), usm_kind: Some("host"), ..Default::default() },
        _ => UrParams::default(),
    }
}

/// Is this a UR function that enqueues a command (and returns its event through `phEvent`)?
pub fn is_enqueue(name: &str) -> bool {
    name.starts_with("urEnqueue")
}

/// Strips a trailing `[...]` (pointer or counter) so names aggregate: `"memcpy"` stays,
/// `"Memory Allocation[0x55…]"` becomes `"Memory Allocation"`.
pub fn base_name(name: &str) -> &str {
    if name.ends_with(']')
        && let Some(i) = name.rfind('[')
        && i > 0
    {
        return name[..i].trim_end();
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn names() {
        assert_eq!(trace_type_name(0x1c), "function_with_args_begin");
        assert_eq!(trace_type_name(42), "queue_create");
        assert_eq!(trace_type_name(7), "type_7");
        assert_eq!(base_name("Memory Allocation[0x1234]"), "Memory Allocation");
        assert_eq!(base_name("memcpy"), "memcpy");
        assert_eq!(base_name("[x]"), "[x]");
    }
}
