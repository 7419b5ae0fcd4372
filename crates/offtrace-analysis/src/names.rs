//! Names of XPTI trace point types, for the counts of the optional raw layer (`notifications`).
//!
//! A small copy of the XPTI header names keeps this crate free of the FFI crate; the values are
//! the `trace_point_type_t` enumerators of XPTI 2026.2 (see `offtrace-xpti`'s `abi::trace_type`).

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

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn names() {
        assert_eq!(trace_type_name(0x1c), "function_with_args_begin");
        assert_eq!(trace_type_name(42), "queue_create");
        assert_eq!(trace_type_name(7), "type_7");
    }
}
