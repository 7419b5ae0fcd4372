/* print_calls: an offtrace tool that prints every UR call with its arguments, and the
 * allocations each kernel dispatch uses.
 *
 *   cc -shared -fPIC -I crates/offtrace-capi/include examples/c/print_calls.c -o libprint_calls.so
 *   OFFTRACE_TOOLS=$PWD/libprint_calls.so <application traced by offtrace>
 *   (or: offtrace record --tool ./libprint_calls.so -- <application>)
 */
#include <offtrace/offtrace.h>

#include <inttypes.h>
#include <stdio.h>

static offtrace_context_id_t ctx;

static int print_arg(offtrace_tracing_kind_t kind, offtrace_tracing_operation_t op, uint32_t n, const void* addr,
                     int32_t indirection, const char* type, const char* name, const char* value, int32_t deref,
                     void* data) {
    (void)kind; (void)op; (void)addr; (void)indirection; (void)deref; (void)data;
    printf("    %u: %-26s %-20s = %s\n", n, type, name, value);
    return 0;
}

static void on_ur_call(offtrace_callback_tracing_record_t r, offtrace_user_data_t* user, void* data) {
    (void)data;
    offtrace_timestamp_t now = 0;
    offtrace_get_timestamp(&now);
    if (r.phase == OFFTRACE_CALLBACK_PHASE_ENTER) {
        user->value = now; /* travels to the exit */
        return;
    }
    const char* kind = NULL;
    const char* op = NULL;
    offtrace_query_callback_tracing_kind_name(r.kind, &kind, NULL);
    offtrace_query_callback_tracing_kind_operation_name(r.kind, r.operation, &op, NULL);
    const offtrace_callback_tracing_ur_api_data_t* p = r.payload;
    printf("\n[%s] %s -> %d (corr %" PRIu64 ", %" PRIu64 " ns)\n", kind, op ? op : "?", p->result,
           r.correlation_id.internal, now - user->value);
    offtrace_iterate_callback_tracing_kind_operation_args(r, print_arg, 1, NULL);
}

static void on_dispatch(offtrace_callback_tracing_record_t r, offtrace_user_data_t* user, void* data) {
    (void)user; (void)data;
    const offtrace_callback_tracing_kernel_dispatch_data_t* p = r.payload;
    uint32_t count = 0;
    offtrace_kernel_get_allocation_properties(&r, &count, NULL);
    offtrace_kernel_allocation_properties_t props[16];
    if (count > 16) count = 16;
    offtrace_kernel_get_allocation_properties(&r, &count, props);
    static const char* types[] = {"UNKNOWN", "HOST", "DEVICE", "SHARED"};
    if (r.phase == OFFTRACE_CALLBACK_PHASE_COMPLETE) {
        /* The device times of a dispatch reported before (same correlation id). */
        printf("\n[KERNEL_DISPATCH done] %s (corr %" PRIu64 ") device %" PRIu64 " ns\n",
               p->kernel_name ? p->kernel_name : "?", r.correlation_id.internal, p->device_end - p->device_start);
        return;
    }
    printf("\n[KERNEL_DISPATCH] %s (corr %" PRIu64 ")\n", p->kernel_name ? p->kernel_name : "?", r.correlation_id.internal);
    for (uint32_t i = 0; i < count; i++)
        printf("    Allocation %u: 0x%" PRIx64 ", size: %" PRIu64 " argIndex: %d type: %s\n", i, props[i].base,
               props[i].size, props[i].arg_index, types[props[i].type & 3]);
}

static int tool_init(offtrace_client_finalize_t fini, void* tool_data) {
    (void)fini; (void)tool_data;
    if (offtrace_create_context(&ctx) != OFFTRACE_STATUS_SUCCESS) return 1;
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_UR_API, NULL, 0, on_ur_call, NULL);
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_KERNEL_DISPATCH, NULL, 0, on_dispatch, NULL);
    return offtrace_start_context(ctx) == OFFTRACE_STATUS_SUCCESS ? 0 : 1;
}

static void tool_fini(void* tool_data) {
    (void)tool_data;
    offtrace_destroy_context(ctx);
    fflush(stdout);
}

offtrace_tool_configure_result_t* offtrace_configure(uint32_t version, const char* runtime_version, uint32_t priority,
                                                     offtrace_client_id_t* client_id) {
    (void)version; (void)runtime_version; (void)priority;
    static offtrace_tool_configure_result_t result = {sizeof(offtrace_tool_configure_result_t), tool_init, tool_fini, NULL};
    client_id->name = "print_calls";
    return &result;
}
