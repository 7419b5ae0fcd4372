/* record_tool: an offtrace tool for the OpenCL layer's tests. Writes one line per record to the
 * file named by OFFTRACE_TEST_OUT:
 *
 *   api <function> <result> <correlation>          OPENCL_API exit (callback service)
 *   launch <kernel name> <correlation>             KERNEL_DISPATCH at enqueue (callback service)
 *   alloc <op> <ptr> <size> <type>                 MEMORY_ALLOC (callback service)
 *   code <op> <phase> <handle>                     CODE_OBJECT (callback service)
 *   act <kind> <op> <correlation> <start> <end>    device activity (buffer service, lossless)
 */
#include <offtrace/offtrace.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define KIND_OPENCL_API 12

static offtrace_context_id_t ctx, bctx;
static offtrace_buffer_id_t buf;
static FILE* out;

static void on_api(offtrace_callback_tracing_record_t r, offtrace_user_data_t* u, void* d) {
    (void)u; (void)d;
    if (r.phase != OFFTRACE_CALLBACK_PHASE_EXIT) return;
    const char* op = NULL;
    offtrace_query_callback_tracing_kind_operation_name(r.kind, r.operation, &op, NULL);
    const offtrace_callback_tracing_ur_api_data_t* p = r.payload;
    fprintf(out, "api %s %d %" PRIu64 "\n", op ? op : "?", p ? p->result : -9999, r.correlation_id.internal);
}

static void on_launch(offtrace_callback_tracing_record_t r, offtrace_user_data_t* u, void* d) {
    (void)u; (void)d;
    const offtrace_callback_tracing_kernel_dispatch_data_t* p = r.payload;
    uint32_t n = 0;
    offtrace_kernel_get_allocation_properties(&r, &n, NULL);
    fprintf(out, "launch %s %" PRIu64 " allocs=%u\n", p && p->kernel_name ? p->kernel_name : "?", r.correlation_id.internal, n);
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

static void on_buffer(offtrace_context_id_t c, offtrace_buffer_id_t b, const offtrace_buffer_tracing_record_t* recs,
                      size_t count, void* d, uint64_t drops) {
    (void)c; (void)b; (void)d;
    for (size_t i = 0; i < count; i++)
        fprintf(out, "act %u %u %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", recs[i].kind, recs[i].operation,
                recs[i].correlation_id.internal, recs[i].start_timestamp, recs[i].end_timestamp);
    if (drops) fprintf(out, "drops %" PRIu64 "\n", drops);
}

static int tool_init(offtrace_client_finalize_t fini, void* tool_data) {
    (void)fini; (void)tool_data;
    const char* path = getenv("OFFTRACE_TEST_OUT");
    out = fopen(path ? path : "/dev/null", "w");
    if (!out) return 1;
    setvbuf(out, NULL, _IOLBF, 0);
    if (offtrace_create_context(&ctx) != OFFTRACE_STATUS_SUCCESS) return 1;
    if (offtrace_configure_callback_tracing_service(ctx, KIND_OPENCL_API, NULL, 0, on_api, NULL)) return 1;
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_KERNEL_DISPATCH, NULL, 0, on_launch, NULL);
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_MEMORY_ALLOC, NULL, 0, on_alloc, NULL);
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_CODE_OBJECT, NULL, 0, on_code, NULL);
    if (offtrace_create_context(&bctx) != OFFTRACE_STATUS_SUCCESS) return 1;
    if (offtrace_create_buffer(bctx, 1 << 16, 1 << 15, OFFTRACE_BUFFER_POLICY_LOSSLESS, on_buffer, NULL, &buf)) return 1;
    offtrace_tracing_kind_t kinds[] = {OFFTRACE_TRACING_KIND_KERNEL_DISPATCH, OFFTRACE_TRACING_KIND_MEMORY_COPY,
                                       OFFTRACE_TRACING_KIND_MEMORY_FILL, OFFTRACE_TRACING_KIND_SYNC};
    for (int i = 0; i < 4; i++) offtrace_configure_buffer_tracing_service(bctx, kinds[i], NULL, 0, buf);
    offtrace_start_context(ctx);
    offtrace_start_context(bctx);
    return 0;
}

static void tool_fini(void* tool_data) {
    (void)tool_data;
    offtrace_flush_buffer(buf);
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
