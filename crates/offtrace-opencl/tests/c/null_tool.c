/* null_tool: subscribes OPENCL_API (callbacks that do nothing) and the device activity kinds
 * (a buffer whose records are dropped on delivery): the layer's and the services' cost with a
 * listener that costs nothing itself. Used by scripts/opencl-overhead.py. */
#include <offtrace/offtrace.h>
#include <stddef.h>

static offtrace_context_id_t ctx;
static offtrace_buffer_id_t buf;

static void on_api(offtrace_callback_tracing_record_t r, offtrace_user_data_t* u, void* d) { (void)r; (void)u; (void)d; }
static void on_buffer(offtrace_context_id_t c, offtrace_buffer_id_t b, const offtrace_buffer_tracing_record_t* const* recs,
                      size_t count, void* d, uint64_t drops) { (void)c; (void)b; (void)recs; (void)count; (void)d; (void)drops; }

static int tool_init(offtrace_client_finalize_t fini, void* tool_data) {
    (void)fini; (void)tool_data;
    if (offtrace_create_context(&ctx)) return 1;
    offtrace_configure_callback_tracing_service(ctx, 12 /* OPENCL_API */, NULL, 0, on_api, NULL);
    if (offtrace_create_buffer(ctx, 1 << 16, 1 << 15, OFFTRACE_BUFFER_POLICY_LOSSLESS, on_buffer, NULL, &buf)) return 1;
    offtrace_tracing_kind_t kinds[] = {OFFTRACE_TRACING_KIND_KERNEL_DISPATCH, OFFTRACE_TRACING_KIND_MEMORY_COPY,
                                       OFFTRACE_TRACING_KIND_MEMORY_FILL, OFFTRACE_TRACING_KIND_SYNC};
    for (int i = 0; i < 4; i++) offtrace_configure_buffer_tracing_service(ctx, kinds[i], NULL, 0, buf);
    return offtrace_start_context(ctx) != OFFTRACE_STATUS_SUCCESS;
}

static void tool_fini(void* tool_data) { (void)tool_data; offtrace_flush_buffer(buf); }

offtrace_tool_configure_result_t* offtrace_configure(uint32_t version, const char* runtime_version, uint32_t priority,
                                                     offtrace_client_id_t* client_id) {
    (void)version; (void)runtime_version; (void)priority;
    static offtrace_tool_configure_result_t result = {sizeof(offtrace_tool_configure_result_t), tool_init, tool_fini, NULL};
    client_id->name = "null_tool";
    return &result;
}
