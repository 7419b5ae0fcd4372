//! The XPTI 2026.2 C ABI: data layouts, enumerations and the callback type, bit-exact with the
//! headers shipped in `intel-sycl-rt` 2026.2 (`include/xpti/xpti_data_types.h`).
//!
//! Layouts are checked by the tests at the bottom of this file against the sizes and offsets in
//! `docs/reference/xpti-abi.md` §4 (themselves checked with `offsetof` on the real headers).
//! Nothing here allocates or calls anything: these are plain `#[repr(C)]` views.

use std::ffi::{c_char, c_void};

/// `xpti::result_t`.
pub type XptiResult = i32;
pub const XPTI_RESULT_SUCCESS: XptiResult = 0;
pub const XPTI_RESULT_FALSE: XptiResult = 1;
pub const XPTI_RESULT_FAIL: XptiResult = 0x8000_4001_u32 as i32;
pub const XPTI_RESULT_NOTIMPL: XptiResult = 0x8000_4002_u32 as i32;
pub const XPTI_RESULT_DUPLICATE: XptiResult = 0x8000_4003_u32 as i32;
pub const XPTI_RESULT_NOTFOUND: XptiResult = 0x8000_4004_u32 as i32;
pub const XPTI_RESULT_UNDELETE: XptiResult = 0x8000_4005_u32 as i32;
pub const XPTI_RESULT_INVALIDARG: XptiResult = 0x8000_4006_u32 as i32;

/// `xpti::string_id_t` invalid value.
pub const INVALID_STRING_ID: u32 = 0xFFFF_FFFF;
/// `xpti::object_id_t` invalid value.
pub const INVALID_OBJECT_ID: i32 = -1;
/// `xpti::invalid_uid`.
pub const INVALID_UID: u64 = 0;
/// `payload_t::line_no` / `column_no` when absent.
pub const INVALID_LINE: u32 = 0xFFFF_FFFF;

/// Legacy `xpti::uid_t` (24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LegacyUid {
    pub p1: u64,
    pub p2: u64,
    pub p3: u64,
}

/// `xpti::payload_t` (80 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Payload {
    pub name: *const c_char,
    pub stack_trace: *const c_char,
    pub source_file: *const c_char,
    pub line_no: u32,
    pub column_no: u32,
    pub code_ptr_va: *const c_void,
    pub internal: u64,
    pub flags: u64,
    pub uid: LegacyUid,
}

/// `payload_flag_t` bits.
pub mod payload_flags {
    pub const NAME_AVAILABLE: u64 = 0x1;
    pub const SOURCE_FILE_AVAILABLE: u64 = 0x2;
    pub const CODE_POINTER_AVAILABLE: u64 = 0x4;
    pub const LINE_INFO_AVAILABLE: u64 = 0x8;
    pub const COLUMN_INFO_AVAILABLE: u64 = 0x10;
    pub const STACK_TRACE_AVAILABLE: u64 = 0x20;
    pub const PAYLOAD_REGISTERED: u64 = 0x8000;
    /// Bit 17: the header writes it as `2 << 16`.
    pub const HASH_AVAILABLE: u64 = 0x2_0000;
}

/// `trace_event_flag_t` bits.
pub mod event_flags {
    pub const UID_AVAILABLE: u64 = 0x1;
    pub const SOURCE_UID_AVAILABLE: u64 = 0x2;
    pub const TARGET_UID_AVAILABLE: u64 = 0x4;
    pub const EVENT_TYPE_AVAILABLE: u64 = 0x8;
    pub const ACTIVITY_TYPE_AVAILABLE: u64 = 0x10;
    pub const PAYLOAD_AVAILABLE: u64 = 0x20;
}

/// The 56-byte image of a libstdc++ `std::unordered_map<uint32_t, int32_t>` embedded in every event
/// (`reserved.metadata`). See `docs/reference/xpti-abi.md` §4.5 for its layout.
#[repr(C)]
#[derive(Debug)]
pub struct MetadataMapImage {
    pub buckets: *mut *mut c_void,
    pub bucket_count: usize,
    /// Head of the singly linked node list ("before begin" node's `next`).
    pub before_begin_next: *mut MetadataNode,
    pub element_count: usize,
    pub max_load_factor: f32,
    pub _pad: u32,
    pub next_resize: usize,
    pub single_bucket: *mut c_void,
}

/// A node of the metadata map: `next` @0, key (string id) @8, value (object id) @12.
#[repr(C)]
#[derive(Debug)]
pub struct MetadataNode {
    pub next: *mut MetadataNode,
    pub key: u32,
    pub value: i32,
}

/// `reserved_data_t` (64 bytes).
#[repr(C)]
#[derive(Debug)]
pub struct ReservedData {
    pub payload: *mut Payload,
    pub metadata: MetadataMapImage,
}

/// `xpti::trace_event_data_t` (128 bytes).
#[repr(C)]
#[derive(Debug)]
pub struct TraceEventData {
    pub unique_id: u64,
    pub data_id: u64,
    pub instance_id: u64,
    pub event_type: u16,
    pub activity_type: u16,
    pub unused: u32,
    pub source_id: u64,
    pub target_id: u64,
    pub reserved: ReservedData,
    pub global_user_data: *mut c_void,
    pub flags: u64,
}

/// `xpti::object_data_t` (24 bytes), returned by `xptiLookupObject` through a hidden pointer.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ObjectData {
    pub size: usize,
    pub data: *const c_char,
    pub type_: u8,
}

/// `xpti::function_with_args_t` (40 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FunctionWithArgs {
    pub function_id: u32,
    pub function_name: *const c_char,
    pub args_data: *mut c_void,
    pub ret_data: *mut c_void,
    pub user_data: *mut c_void,
}

/// `xpti::mem_alloc_data_t` (40 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemAllocData {
    pub mem_object_handle: usize,
    pub alloc_pointer: usize,
    pub alloc_size: usize,
    pub guard_zone_size: usize,
    pub reserved: *mut c_void,
}

/// `xpti::offload_buffer_data_t` (56 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OffloadBufferData {
    pub user_object_handle: usize,
    pub host_object_handle: usize,
    pub element_type: *const c_char,
    pub element_size: u32,
    pub dim: u32,
    pub range: [usize; 3],
}

/// `xpti::offload_association_data_t` (16 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OffloadAssociationData {
    pub user_object_handle: usize,
    pub mem_object_handle: usize,
}

/// `xpti::offload_accessor_data_t` (24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OffloadAccessorData {
    pub buffer_handle: usize,
    pub accessor_handle: usize,
    pub target: u32,
    pub mode: u32,
}

/// `xpti::offload_kernel_enqueue_data_t` (80 bytes), the `enqueue_kernel_data` metadata blob.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OffloadKernelEnqueueData {
    pub global_size: [usize; 3],
    pub local_size: [usize; 3],
    pub offset: [usize; 3],
    pub args_num: usize,
}

/// `xpti::offload_kernel_arg_data_t` (24 bytes), the `arg<N>` metadata blobs.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OffloadKernelArgData {
    pub type_: i32,
    pub pointer: *mut c_void,
    pub size: i32,
    pub index: i32,
}

/// The subscriber callback: `void cb(uint16_t trace_type, trace_event_data_t *parent,
/// trace_event_data_t *event, uint64_t instance, const void *user_data)`.
pub type TracepointCallback = unsafe extern "C" fn(
    trace_type: u16,
    parent: *mut TraceEventData,
    event: *mut TraceEventData,
    instance: u64,
    user_data: *const c_void,
);

/// Trace point types (`trace_point_type_t`, `uint16_t`).
pub mod trace_type {
    pub const UNKNOWN_TYPE: u16 = 0;
    pub const GRAPH_CREATE: u16 = 2;
    pub const NODE_CREATE: u16 = 4;
    pub const EDGE_CREATE: u16 = 6;
    pub const REGION_BEGIN: u16 = 8;
    pub const REGION_END: u16 = 9;
    pub const TASK_BEGIN: u16 = 10;
    pub const TASK_END: u16 = 11;
    pub const BARRIER_BEGIN: u16 = 12;
    pub const BARRIER_END: u16 = 13;
    pub const LOCK_BEGIN: u16 = 14;
    pub const LOCK_END: u16 = 15;
    pub const SIGNAL: u16 = 16;
    pub const TRANSFER_BEGIN: u16 = 18;
    pub const TRANSFER_END: u16 = 19;
    pub const THREAD_BEGIN: u16 = 20;
    pub const THREAD_END: u16 = 21;
    pub const WAIT_BEGIN: u16 = 22;
    pub const WAIT_END: u16 = 23;
    pub const FUNCTION_BEGIN: u16 = 24;
    pub const FUNCTION_END: u16 = 25;
    pub const METADATA: u16 = 26;
    pub const FUNCTION_WITH_ARGS_BEGIN: u16 = 28;
    pub const FUNCTION_WITH_ARGS_END: u16 = 29;
    pub const MEM_ALLOC_BEGIN: u16 = 32;
    pub const MEM_ALLOC_END: u16 = 33;
    pub const MEM_RELEASE_BEGIN: u16 = 34;
    pub const MEM_RELEASE_END: u16 = 35;
    pub const OFFLOAD_ALLOC_MEMORY_OBJECT_CONSTRUCT: u16 = 36;
    pub const OFFLOAD_ALLOC_MEMORY_OBJECT_DESTRUCT: u16 = 37;
    pub const OFFLOAD_ALLOC_MEMORY_OBJECT_ASSOCIATE: u16 = 38;
    pub const OFFLOAD_ALLOC_MEMORY_OBJECT_RELEASE: u16 = 39;
    pub const OFFLOAD_ALLOC_ACCESSOR: u16 = 40;
    pub const QUEUE_CREATE: u16 = 42;
    pub const QUEUE_DESTROY: u16 = 43;
    pub const DIAGNOSTICS: u16 = 126;
    pub const USER_DEFINED: u16 = 128;

    /// Every named trace point type, with the name the XPTI headers give it.
    pub const NAMED: &[(u16, &str)] = &[
        (GRAPH_CREATE, "graph_create"),
        (NODE_CREATE, "node_create"),
        (EDGE_CREATE, "edge_create"),
        (REGION_BEGIN, "region_begin"),
        (REGION_END, "region_end"),
        (TASK_BEGIN, "task_begin"),
        (TASK_END, "task_end"),
        (BARRIER_BEGIN, "barrier_begin"),
        (BARRIER_END, "barrier_end"),
        (LOCK_BEGIN, "lock_begin"),
        (LOCK_END, "lock_end"),
        (SIGNAL, "signal"),
        (TRANSFER_BEGIN, "transfer_begin"),
        (TRANSFER_END, "transfer_end"),
        (THREAD_BEGIN, "thread_begin"),
        (THREAD_END, "thread_end"),
        (WAIT_BEGIN, "wait_begin"),
        (WAIT_END, "wait_end"),
        (FUNCTION_BEGIN, "function_begin"),
        (FUNCTION_END, "function_end"),
        (METADATA, "metadata"),
        (FUNCTION_WITH_ARGS_BEGIN, "function_with_args_begin"),
        (FUNCTION_WITH_ARGS_END, "function_with_args_end"),
        (MEM_ALLOC_BEGIN, "mem_alloc_begin"),
        (MEM_ALLOC_END, "mem_alloc_end"),
        (MEM_RELEASE_BEGIN, "mem_release_begin"),
        (MEM_RELEASE_END, "mem_release_end"),
        (OFFLOAD_ALLOC_MEMORY_OBJECT_CONSTRUCT, "offload_alloc_memory_object_construct"),
        (OFFLOAD_ALLOC_MEMORY_OBJECT_DESTRUCT, "offload_alloc_memory_object_destruct"),
        (OFFLOAD_ALLOC_MEMORY_OBJECT_ASSOCIATE, "offload_alloc_memory_object_associate"),
        (OFFLOAD_ALLOC_MEMORY_OBJECT_RELEASE, "offload_alloc_memory_object_release"),
        (OFFLOAD_ALLOC_ACCESSOR, "offload_alloc_accessor"),
        (QUEUE_CREATE, "queue_create"),
        (QUEUE_DESTROY, "queue_destroy"),
        (DIAGNOSTICS, "diagnostics"),
    ];

    /// The header name of a trace point type; `None` for unused values and user-defined types.
    pub fn name(tt: u16) -> Option<&'static str> {
        NAMED.iter().find(|(v, _)| *v == tt).map(|(_, n)| *n)
    }
}

/// Trace event types (`trace_event_type_t`).
pub mod event_type {
    pub const UNKNOWN_EVENT: u16 = 0;
    pub const GRAPH: u16 = 1;
    pub const ALGORITHM: u16 = 2;
    pub const BARRIER: u16 = 3;
    pub const SCHEDULER: u16 = 4;
    pub const ASYNC: u16 = 5;
    pub const LOCK: u16 = 6;
    pub const OFFLOAD_READ: u16 = 7;
    pub const OFFLOAD_WRITE: u16 = 8;
    pub const OFFLOAD_MEMORY_OBJECT: u16 = 9;
    pub const OFFLOAD_ACCESSOR: u16 = 10;
    pub const USER_DEFINED: u16 = 0x80;
}

/// Activity types (`trace_activity_type_t`, an `int`).
pub mod activity_type {
    pub const UNKNOWN_ACTIVITY: i32 = 0;
    pub const ACTIVE: i32 = 1;
    pub const OVERHEAD: i32 = 2;
    pub const BACKGROUND: i32 = 4;
    pub const SLEEP_ACTIVITY: i32 = 8;
}

/// Metadata value types (`metadata_type_t`).
pub mod metadata_type {
    pub const BINARY: u8 = 0;
    pub const STRING: u8 = 1;
    pub const SIGNED_INTEGER: u8 = 2;
    pub const UNSIGNED_INTEGER: u8 = 3;
    pub const FLOATING: u8 = 4;
    pub const BOOLEAN: u8 = 5;
}

/// Stream detail levels (`stream_detail_level_t`, `uint8_t`).
pub mod detail_level {
    pub const NONE: u8 = 0;
    pub const BASIC: u8 = 1;
    pub const NORMAL: u8 = 2;
    pub const VERBOSE: u8 = 3;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn payload_layout() {
        assert_eq!(size_of::<Payload>(), 80);
        assert_eq!(offset_of!(Payload, name), 0);
        assert_eq!(offset_of!(Payload, stack_trace), 8);
        assert_eq!(offset_of!(Payload, source_file), 16);
        assert_eq!(offset_of!(Payload, line_no), 24);
        assert_eq!(offset_of!(Payload, column_no), 28);
        assert_eq!(offset_of!(Payload, code_ptr_va), 32);
        assert_eq!(offset_of!(Payload, internal), 40);
        assert_eq!(offset_of!(Payload, flags), 48);
        assert_eq!(offset_of!(Payload, uid), 56);
        assert_eq!(size_of::<LegacyUid>(), 24);
    }

    #[test]
    fn event_layout() {
        assert_eq!(size_of::<TraceEventData>(), 128);
        assert_eq!(align_of::<TraceEventData>(), 8);
        assert_eq!(offset_of!(TraceEventData, unique_id), 0);
        assert_eq!(offset_of!(TraceEventData, data_id), 8);
        assert_eq!(offset_of!(TraceEventData, instance_id), 16);
        assert_eq!(offset_of!(TraceEventData, event_type), 24);
        assert_eq!(offset_of!(TraceEventData, activity_type), 26);
        assert_eq!(offset_of!(TraceEventData, unused), 28);
        assert_eq!(offset_of!(TraceEventData, source_id), 32);
        assert_eq!(offset_of!(TraceEventData, target_id), 40);
        assert_eq!(offset_of!(TraceEventData, reserved), 48);
        assert_eq!(offset_of!(TraceEventData, global_user_data), 112);
        assert_eq!(offset_of!(TraceEventData, flags), 120);
        assert_eq!(size_of::<ReservedData>(), 64);
        assert_eq!(offset_of!(ReservedData, metadata), 8);
        assert_eq!(size_of::<MetadataMapImage>(), 56);
        assert_eq!(offset_of!(MetadataMapImage, element_count), 24);
        assert_eq!(offset_of!(MetadataMapImage, max_load_factor), 32);
        assert_eq!(offset_of!(MetadataMapImage, next_resize), 40);
        assert_eq!(offset_of!(MetadataMapImage, single_bucket), 48);
        assert_eq!(size_of::<MetadataNode>(), 16);
        assert_eq!(offset_of!(MetadataNode, key), 8);
        assert_eq!(offset_of!(MetadataNode, value), 12);
    }

    #[test]
    fn user_data_layouts() {
        assert_eq!(size_of::<ObjectData>(), 24);
        assert_eq!(offset_of!(ObjectData, type_), 16);
        assert_eq!(size_of::<FunctionWithArgs>(), 40);
        assert_eq!(offset_of!(FunctionWithArgs, function_name), 8);
        assert_eq!(offset_of!(FunctionWithArgs, args_data), 16);
        assert_eq!(offset_of!(FunctionWithArgs, ret_data), 24);
        assert_eq!(offset_of!(FunctionWithArgs, user_data), 32);
        assert_eq!(size_of::<MemAllocData>(), 40);
        assert_eq!(size_of::<OffloadBufferData>(), 56);
        assert_eq!(offset_of!(OffloadBufferData, element_size), 24);
        assert_eq!(offset_of!(OffloadBufferData, dim), 28);
        assert_eq!(offset_of!(OffloadBufferData, range), 32);
        assert_eq!(size_of::<OffloadAssociationData>(), 16);
        assert_eq!(size_of::<OffloadAccessorData>(), 24);
        assert_eq!(offset_of!(OffloadAccessorData, mode), 20);
        assert_eq!(size_of::<OffloadKernelEnqueueData>(), 80);
        assert_eq!(offset_of!(OffloadKernelEnqueueData, args_num), 72);
        assert_eq!(size_of::<OffloadKernelArgData>(), 24);
        assert_eq!(offset_of!(OffloadKernelArgData, pointer), 8);
        assert_eq!(offset_of!(OffloadKernelArgData, size), 16);
        assert_eq!(offset_of!(OffloadKernelArgData, index), 20);
    }

    #[test]
    fn trace_type_names() {
        assert_eq!(trace_type::name(0x1c), Some("function_with_args_begin"));
        assert_eq!(trace_type::name(42), Some("queue_create"));
        assert_eq!(trace_type::name(1), None);
    }
}
