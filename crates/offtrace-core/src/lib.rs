//! offtrace-core: the contract every backend and every tool speaks.
//!
//! Modules (one concept each): `clock` (the trace clock), `ring` (single-producer/single-consumer record ring),
//! services (contexts, callback and buffer tracing) live in their own modules.

mod allocation;
mod args;
mod buffer;
mod buffer_record;
mod callback;
pub mod clock;
mod context;
mod correlation;
mod direct;
mod doorbell;
mod error;
mod generation;
mod inflight;
mod kind;
mod marker;
mod payload;
pub mod ring;
mod shared_table;
mod sync;
mod thread_cache;
mod timestamp;

pub use allocation::{
    AllocationProperties, emit_memory_alloc, emit_memory_free, emit_memory_sub_alloc, for_each_kernel_allocation,
    kernel_allocation_properties, kernel_allocation_properties_into, live_count as live_allocation_count,
    lookup as lookup_allocation, record_alloc, record_free,
};
pub use args::{ArgInfo, MAX_STRING, format_value, iterate_operation_args};
pub use buffer::{
    BufferCallbackFn, BufferId, BufferPolicy, MAX_BUFFER_BYTES, buffer_capacity, buffer_dropped_total,
    configure_buffer_tracing_service, create_buffer, destroy_buffer, flush_buffer,
};
pub use buffer_record::{
    ApiCallRecord, BufferRecordHeader, CodeObjectRecord, CounterRecord, DeviceRecord, HeaderOnlyRecord,
    KernelDispatchRecord, MAX_RECORD_BYTES, MAX_RECORD_STRING, MarkerRecord, MemoryAllocRecord, MemoryCopyRecord,
    MemoryFillRecord, QueueRecord, SyncRecord, TaskGraphRecord,
};
pub use callback::{
    CallToken, CallbackFn, CallbackRecord, CorrelationId, Phase, UserData, configure_callback_tracing_closure,
    configure_callback_tracing_service, emit_activity, emit_activity_interned, emit_enter, emit_enter_with, emit_exit,
    emit_exit_at, emit_instant, emit_instant_at, emit_instant_interned, emit_instant_with, kind_enabled,
};
pub use context::{
    ContextId, DESTROY_PAIR_WAIT, MAX_CONTEXTS, abandoned_pairs, configured_kinds, context_is_active, create_context,
    destroy_context, in_callback, start_context, stop_context,
};
pub use correlation::{
    ExternalCorrelationHook, ID_BLOCK, ReportedHook, current_correlation_id, current_thread_id, next_correlation_id,
    note_times_below, pop_external_correlation_id, push_external_correlation_id, reported_in_call,
    set_external_correlation_hook, set_process_external_correlation_id, set_reported_hook, times_delivered_below,
};
pub use direct::{
    DirectCall, DirectRecord, DirectSink, DirectThreadWord, backend_thread_word, clear_direct_thread_word,
    direct_path_applies, set_direct_sink,
};
pub use error::ServiceError;
pub use generation::{Generation, GenerationCounter, Memo};
pub use inflight::{asymmetric_fences, late_lost};
pub use kind::{
    ArgDescriptor, ArgFormat, KIND_COUNT, Kind, Operation, RegisterError, code_object, counter_op, device_op,
    kernel_dispatch, marker_op, memory_alloc, memory_copy, memory_fill, queue_flags, queue_op,
    register_kind_operations, sycl_queue, sync_op, task_graph, xpti_op,
};
pub use marker::{
    RangeGuard, mark as marker_mark, range as marker_range, range_pop as marker_range_pop,
    range_push as marker_range_push,
};
pub use payload::{
    ApiCallPayload, CodeObjectPayload, CopyDirection, CounterPayload, CounterValueType, DevicePayload, DeviceType,
    ImplicitAllocation, KernelDispatchPayload, MAX_ARGS, MAX_KERNEL_ARGS, MarkerPayload, MemoryAllocPayload,
    MemoryCopyPayload, MemoryFillPayload, MemoryType, Payload, QueuePayload, RawPayload, SyncPayload, TaskGraphPayload,
};
pub use shared_table::{SHARED_TABLE_WAYS, SharedTable};
pub use timestamp::{timestamp_ns, timestamps_from_tsc};
