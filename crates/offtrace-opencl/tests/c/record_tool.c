/* record_tool: an offtrace tool for the OpenCL layer's tests. Writes one line per record to the
 * file named by OFFTRACE_TEST_OUT:
 *
 *   api <function> <result> <correlation>          OPENCL_API exit
 *   arg <function> <n> <type> <name> = <value>     its decoded arguments (argument iteration),
 *                                                  for clEnqueueNDRangeKernel and clCreateBuffer
 *   launch <kernel name> <correlation> allocs=<n>  KERNEL_DISPATCH at enqueue (phase NONE)
 *   enq <kind> <op> <correlation>                  any device activity at enqueue (phase NONE)
 *   act <kind> <op> <correlation> <start> <end>    device activity with device times (phase COMPLETE)
 *   alloc <op> <ptr> <size> <type>                 MEMORY_ALLOC
 *   code <op> <phase> <handle>                     CODE_OBJECT
 *   queue <op> <queue> <device> <flags>            QUEUE
 *   device <handle> <type> <name>                  DEVICE
 *   counter <op> <id> <value> <name> <unit>        COUNTER
 * All from callback services (activity arrives from the runtime's threads: lines are written
 * with one fprintf each, which stdio locks).
 */
#include <offtrace/offtrace.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static offtrace_context_id_t ctx;
static FILE* out;

static int print_arg(offtrace_tracing_kind_t kind, offtrace_tracing_operation_t op, uint32_t n, const void* addr,
                     int32_t indirection, const char* type, const char* name, const char* value, int32_t deref,
                     void* data) {
    (void)kind; (void)op; (void)addr; (void)indirection; (void)deref;
    fprintf(out, "arg %s %u %s %s = %s\n", (const char*)data, n, type, name, value);
    return 0;
}

static void on_api(offtrace_callback_tracing_record_t r, offtrace_user_data_t* u, void* d) {
    (void)u; (void)d;
    if (r.phase != OFFTRACE_CALLBACK_PHASE_EXIT) return;
    const char* op = NULL;
    offtrace_query_callback_tracing_kind_operation_name(r.kind, r.operation, &op, NULL);
    const offtrace_callback_tracing_ur_api_data_t* p = r.payload;
    fprintf(out, "api %s %d %" PRIu64 "\n", op ? op : "?", p ? p->result : -9999, r.correlation_id.internal);
    if (op && (!strcmp(op, "clEnqueueNDRangeKernel") || !strcmp(op, "clCreateBuffer")))
        offtrace_iterate_callback_tracing_kind_operation_args(r, print_arg, 1, (void*)op);
}

static void on_activity(offtrace_callback_tracing_record_t r, offtrace_user_data_t* u, void* d) {
    (void)u; (void)d;
    uint64_t start = 0, end = 0;
    switch (r.kind) {
    case OFFTRACE_TRACING_KIND_KERNEL_DISPATCH: {
        const offtrace_callback_tracing_kernel_dispatch_data_t* p = r.payload;
        start = p->device_start; end = p->device_end;
        if (r.phase == OFFTRACE_CALLBACK_PHASE_NONE) {
            uint32_t n = 0;
            offtrace_kernel_get_allocation_properties(&r, &n, NULL);
            fprintf(out, "launch %s %" PRIu64 " allocs=%u\n", p->kernel_name ? p->kernel_name : "?", r.correlation_id.internal, n);
        }
        break;
    }
    case OFFTRACE_TRACING_KIND_MEMORY_COPY: {
        const offtrace_callback_tracing_memory_copy_data_t* p = r.payload;
        start = p->device_start; end = p->device_end;
        break;
    }
    case OFFTRACE_TRACING_KIND_MEMORY_FILL: {
        const offtrace_callback_tracing_memory_fill_data_t* p = r.payload;
        start = p->device_start; end = p->device_end;
        break;
    }
    case OFFTRACE_TRACING_KIND_SYNC: {
        const offtrace_callback_tracing_sync_data_t* p = r.payload;
        start = p->device_start; end = p->device_end;
        break;
    }
    }
    if (r.phase == OFFTRACE_CALLBACK_PHASE_COMPLETE)
        fprintf(out, "act %u %u %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", r.kind, r.operation, r.correlation_id.internal, start, end);
    else if (r.phase == OFFTRACE_CALLBACK_PHASE_NONE)
        fprintf(out, "enq %u %u %" PRIu64 "\n", r.kind, r.operation, r.correlation_id.internal);
}

static void on_queue(offtrace_callback_tracing_record_t r, offtrace_user_data_t* u, void* d) {
    (void)u; (void)d;
    const offtrace_callback_tracing_queue_data_t* p = r.payload;
    fprintf(out, "queue %u 0x%" PRIx64 " 0x%" PRIx64 " %" PRIu64 "\n", r.operation, p->queue, p->device, p->flags);
}

static void on_device(offtrace_callback_tracing_record_t r, offtrace_user_data_t* u, void* d) {
    (void)u; (void)d;
    const offtrace_callback_tracing_device_data_t* p = r.payload;
    fprintf(out, "device 0x%" PRIx64 " %u %s\n", p->handle, p->device_type, p->name ? p->name : "?");
}

static void on_counter(offtrace_callback_tracing_record_t r, offtrace_user_data_t* u, void* d) {
    (void)u; (void)d;
    const offtrace_callback_tracing_counter_data_t* p = r.payload;
    fprintf(out, "counter %u %" PRIu64 " %" PRIu64 " %s %s\n", r.operation, p->counter, p->value, p->name ? p->name : "?",
            p->unit && *p->unit ? p->unit : "-");
}

static void on_alloc(offtrace_callback_tracing_record_t r, offtrace_user_data_t* u, void* d) {
    (void)u; (void)d;
    const offtrace_callback_tracing_memory_alloc_data_t* p = r.payload;
    fprintf(out, "alloc %u 0x%" PRIx64 " %" PRIu64 " %u\n", r.operation, p->ptr, p->size, p->type);
}

static void on_code(offtrace_callback_tracing_record_t r, offtrace_user_data_t* u, void* d) {
    (void)u; (void)d;
    const offtrace_callback_tracing_code_object_data_t* p = r.payload;
    fprintf(out, "code %u %u 0x%" PRIx64 "\n", r.operation, r.phase, p->handle);
}

static int tool_init(offtrace_client_finalize_t fini, void* tool_data) {
    (void)fini; (void)tool_data;
    const char* path = getenv("OFFTRACE_TEST_OUT");
    out = fopen(path ? path : "/dev/null", "w");
    if (!out) return 1;
    setvbuf(out, NULL, _IOLBF, 0);
    if (offtrace_create_context(&ctx) != OFFTRACE_STATUS_SUCCESS) return 1;
    if (offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_OPENCL_API, NULL, 0, on_api, NULL)) return 1;
    offtrace_tracing_kind_t kinds[] = {OFFTRACE_TRACING_KIND_KERNEL_DISPATCH, OFFTRACE_TRACING_KIND_MEMORY_COPY,
                                       OFFTRACE_TRACING_KIND_MEMORY_FILL, OFFTRACE_TRACING_KIND_SYNC};
    for (int i = 0; i < 4; i++) offtrace_configure_callback_tracing_service(ctx, kinds[i], NULL, 0, on_activity, NULL);
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_MEMORY_ALLOC, NULL, 0, on_alloc, NULL);
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_CODE_OBJECT, NULL, 0, on_code, NULL);
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_QUEUE, NULL, 0, on_queue, NULL);
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_DEVICE, NULL, 0, on_device, NULL);
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_COUNTER, NULL, 0, on_counter, NULL);
    offtrace_start_context(ctx);
    return 0;
}

static void tool_fini(void* tool_data) {
    (void)tool_data;
    fprintf(out, "end\n");
    fflush(out);
}

offtrace_tool_configure_result_t* offtrace_configure(uint32_t version, const char* runtime_version, uint32_t priority,
                                                     offtrace_client_id_t* client_id) {
    (void)version; (void)runtime_version; (void)priority;
    static offtrace_tool_configure_result_t result = {sizeof(offtrace_tool_configure_result_t), tool_init, tool_fini, NULL};
    client_id->name = "record_tool";
    return &result;
}
