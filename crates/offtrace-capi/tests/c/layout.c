/* Prints the size of every struct of offtrace.h and the offset of every field, one per line,
 * for tests/c_api.rs to compare with the Rust definitions. */
#include <offtrace/offtrace.h>

#include <stddef.h>
#include <stdio.h>

#define S(T) printf(#T " %zu\n", sizeof(T))
#define F(T, f) printf(#T "." #f " %zu\n", offsetof(T, f))

int main(void) {
    S(offtrace_context_id_t);
    S(offtrace_buffer_id_t);
    S(offtrace_user_data_t);
    S(offtrace_correlation_id_t);
    F(offtrace_correlation_id_t, external);
    S(offtrace_callback_tracing_record_t);
    F(offtrace_callback_tracing_record_t, thread_id);
    F(offtrace_callback_tracing_record_t, correlation_id);
    F(offtrace_callback_tracing_record_t, kind);
    F(offtrace_callback_tracing_record_t, operation);
    F(offtrace_callback_tracing_record_t, phase);
    F(offtrace_callback_tracing_record_t, payload);
    S(offtrace_buffer_tracing_record_t);
    F(offtrace_buffer_tracing_record_t, kind);
    F(offtrace_buffer_tracing_record_t, operation);
    F(offtrace_buffer_tracing_record_t, correlation_id);
    F(offtrace_buffer_tracing_record_t, thread_id);
    F(offtrace_buffer_tracing_record_t, start_timestamp);
    F(offtrace_buffer_tracing_record_t, end_timestamp);
    F(offtrace_buffer_tracing_record_t, data);
    S(offtrace_kernel_allocation_properties_t);
    F(offtrace_kernel_allocation_properties_t, size);
    F(offtrace_kernel_allocation_properties_t, arg_index);
    F(offtrace_kernel_allocation_properties_t, type);
    S(offtrace_callback_tracing_ur_api_data_t);
    F(offtrace_callback_tracing_ur_api_data_t, arg_count);
    F(offtrace_callback_tracing_ur_api_data_t, result);
    F(offtrace_callback_tracing_ur_api_data_t, has_result);
    F(offtrace_callback_tracing_ur_api_data_t, args);
    S(offtrace_callback_tracing_sycl_queue_data_t);
    S(offtrace_implicit_allocation_t);
    F(offtrace_implicit_allocation_t, type);
    S(offtrace_callback_tracing_kernel_dispatch_data_t);
    F(offtrace_callback_tracing_kernel_dispatch_data_t, kernel_name);
    F(offtrace_callback_tracing_kernel_dispatch_data_t, work_dim);
    F(offtrace_callback_tracing_kernel_dispatch_data_t, kernel_arg_count);
    F(offtrace_callback_tracing_kernel_dispatch_data_t, global_size);
    F(offtrace_callback_tracing_kernel_dispatch_data_t, local_size);
    F(offtrace_callback_tracing_kernel_dispatch_data_t, kernel_args);
    F(offtrace_callback_tracing_kernel_dispatch_data_t, implicit_allocations);
    F(offtrace_callback_tracing_kernel_dispatch_data_t, implicit_allocation_count);
    F(offtrace_callback_tracing_kernel_dispatch_data_t, device);
    F(offtrace_callback_tracing_kernel_dispatch_data_t, device_start);
    F(offtrace_callback_tracing_kernel_dispatch_data_t, device_end);
    S(offtrace_callback_tracing_memory_copy_data_t);
    F(offtrace_callback_tracing_memory_copy_data_t, device);
    F(offtrace_callback_tracing_memory_copy_data_t, direction);
    F(offtrace_callback_tracing_memory_copy_data_t, src_type);
    F(offtrace_callback_tracing_memory_copy_data_t, dst_type);
    F(offtrace_callback_tracing_memory_copy_data_t, device_start);
    F(offtrace_callback_tracing_memory_copy_data_t, device_end);
    S(offtrace_callback_tracing_memory_fill_data_t);
    F(offtrace_callback_tracing_memory_fill_data_t, device);
    F(offtrace_callback_tracing_memory_fill_data_t, device_start);
    F(offtrace_callback_tracing_memory_fill_data_t, device_end);
    S(offtrace_callback_tracing_memory_alloc_data_t);
    F(offtrace_callback_tracing_memory_alloc_data_t, type);
    F(offtrace_callback_tracing_memory_alloc_data_t, device);
    S(offtrace_callback_tracing_task_graph_data_t);
    F(offtrace_callback_tracing_task_graph_data_t, name);
    F(offtrace_callback_tracing_task_graph_data_t, event);
    F(offtrace_callback_tracing_task_graph_data_t, queue);
    S(offtrace_callback_tracing_sync_data_t);
    F(offtrace_callback_tracing_sync_data_t, event_count);
    F(offtrace_callback_tracing_sync_data_t, queue);
    F(offtrace_callback_tracing_sync_data_t, device);
    F(offtrace_callback_tracing_sync_data_t, device_start);
    F(offtrace_callback_tracing_sync_data_t, device_end);
    S(offtrace_callback_tracing_code_object_data_t);
    F(offtrace_callback_tracing_code_object_data_t, name);
    F(offtrace_callback_tracing_code_object_data_t, binary_size);
    S(offtrace_callback_tracing_marker_data_t);
    F(offtrace_callback_tracing_marker_data_t, range_id);
    S(offtrace_callback_tracing_device_data_t);
    F(offtrace_callback_tracing_device_data_t, name);
    F(offtrace_callback_tracing_device_data_t, device_type);
    S(offtrace_callback_tracing_counter_data_t);
    F(offtrace_callback_tracing_counter_data_t, value);
    F(offtrace_callback_tracing_counter_data_t, unit);
    S(offtrace_callback_tracing_xpti_data_t);
    F(offtrace_callback_tracing_xpti_data_t, instance);
    F(offtrace_callback_tracing_xpti_data_t, trace_type);
    S(offtrace_client_id_t);
    F(offtrace_client_id_t, handle);
    S(offtrace_tool_configure_result_t);
    F(offtrace_tool_configure_result_t, initialize);
    F(offtrace_tool_configure_result_t, finalize);
    F(offtrace_tool_configure_result_t, tool_data);
    return 0;
}
