/* discard_buffer: an offtrace tool that collects UR calls in a small discard-policy buffer and a
 * deliberately slow consumer, then reports how many records it got and how many were dropped
 * (delivered + dropped = produced: the discard policy never loses a record silently).
 *
 *   cc -shared -fPIC -I crates/offtrace-capi/include examples/c/discard_buffer.c -o libdiscard_buffer.so
 *   OFFTRACE_TOOLS=$PWD/libdiscard_buffer.so <application traced by offtrace>
 */
#include <offtrace/offtrace.h>

#include <inttypes.h>
#include <stdio.h>
#include <time.h>

static offtrace_context_id_t ctx;
static offtrace_buffer_id_t buffer;
static uint64_t delivered, dropped, deliveries;
static uint64_t by_operation[512];

static uint64_t arguments, longest_call_ns;

/* Runs on offtrace's delivery thread, one delivery at a time: the counters need no lock (the
 * flush in tool_fini returns after the last delivery). Each record is an API call record
 * (the only kind configured): its arguments are inline. */
static void on_records(offtrace_context_id_t c, offtrace_buffer_id_t b,
                       const offtrace_buffer_tracing_record_t* const* records, size_t count, void* data,
                       uint64_t drop_count) {
    (void)c; (void)b; (void)data;
    deliveries++;
    delivered += count;
    dropped += drop_count;
    for (size_t i = 0; i < count; i++) {
        by_operation[records[i]->operation & 511]++;
        if (records[i]->kind != OFFTRACE_TRACING_KIND_UR_API) continue;
        const offtrace_buffer_tracing_api_call_record_t* call =
            (const offtrace_buffer_tracing_api_call_record_t*)records[i];
        arguments += call->arg_count;
        uint64_t ns = call->header.end_timestamp - call->header.start_timestamp;
        if (ns > longest_call_ns) longest_call_ns = ns;
    }
    struct timespec slow = {0, 200000}; /* a slow consumer: 0.2 ms per delivery */
    nanosleep(&slow, NULL);
}

static int tool_init(offtrace_client_finalize_t fini, void* tool_data) {
    (void)fini; (void)tool_data;
    if (offtrace_create_context(&ctx) != OFFTRACE_STATUS_SUCCESS) return 1;
    const size_t rec = 128; /* an API call record with a few arguments */
    if (offtrace_create_buffer(ctx, 64 * rec, 32 * rec, OFFTRACE_BUFFER_POLICY_DISCARD, on_records, NULL, &buffer) !=
        OFFTRACE_STATUS_SUCCESS)
        return 1;
    offtrace_configure_buffer_tracing_service(ctx, OFFTRACE_TRACING_KIND_UR_API, NULL, 0, buffer);
    return offtrace_start_context(ctx) == OFFTRACE_STATUS_SUCCESS ? 0 : 1;
}

static void tool_fini(void* tool_data) {
    (void)tool_data;
    offtrace_stop_context(ctx);
    offtrace_flush_buffer(buffer);
    uint64_t total = 0;
    offtrace_buffer_get_dropped_count(buffer, &total);
    printf("discard_buffer: delivered=%" PRIu64 " dropped=%" PRIu64 " dropped_total=%" PRIu64 " deliveries=%" PRIu64
           " arguments=%" PRIu64 " longest_call_ns=%" PRIu64 "\n",
           delivered, dropped, total, deliveries, arguments, longest_call_ns);
    for (unsigned op = 0; op < 512; op++) {
        if (!by_operation[op]) continue;
        const char* name = NULL;
        offtrace_query_callback_tracing_kind_operation_name(OFFTRACE_TRACING_KIND_UR_API, op, &name, NULL);
        printf("  %-24s %" PRIu64 "\n", name ? name : "?", by_operation[op]);
    }
    offtrace_destroy_context(ctx);
    fflush(stdout);
}

offtrace_tool_configure_result_t* offtrace_configure(uint32_t version, const char* runtime_version, uint32_t priority,
                                                     offtrace_client_id_t* client_id) {
    (void)version; (void)runtime_version; (void)priority;
    static offtrace_tool_configure_result_t result = {sizeof(offtrace_tool_configure_result_t), tool_init, tool_fini, NULL};
    client_id->name = "discard_buffer";
    return &result;
}
