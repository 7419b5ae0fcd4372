/* cuda_tool: an offtrace tool written against offtrace.h only, as for SYCL: CUDA runtime API calls
 * through the callback service (enter/exit pairs, names, arguments) and kernels through the
 * buffer service (device times, the correlation id of the launching call). Prints one summary
 * line at the end, which scripts/gpu-tests.sh checks.
 *
 * External correlation: the tool pushes TOOL_EXTERNAL_ID for its context on the thread that
 * initialises it (the thread calling cuInit: the program's main thread), so every runtime call of
 * that thread and every kernel those calls launched must carry it; kernels reach the tool from
 * CUPTI's buffer thread, so theirs comes through CUPTI's external correlation.
 *
 *   cc -shared -fPIC -I crates/offtrace-capi/include examples/cuda/cuda_tool.c -o libcuda_tool.so
 *   OFFTRACE_TOOLS=$PWD/libcuda_tool.so CUDA_INJECTION64_PATH=.../libofftrace_cuda.so ./program
 */
#include <offtrace/offtrace.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static offtrace_context_id_t ctx;
static offtrace_buffer_id_t buffer;
static uint64_t enters, exits, unpaired, printed;
/* KERNEL_DISPATCH records: at launch (inside the call, no device times) and completed (device
 * start and end from CUPTI's activity records; graph kernels have only these). */
static uint64_t kernels, kernels_timed, kernels_correlated, kernels_uncorrelated;
static __thread int64_t depth;
#define TOOL_EXTERNAL_ID 0x5eedull
/* Runtime calls carrying the tool's external id, and completed kernels carrying it. */
static uint64_t calls_external, kernels_external;

/* Correlation ids of the runtime calls seen (open addressing; ids are never 0). */
#define SLOTS (1u << 20)
static uint64_t seen[SLOTS];
static void remember(uint64_t id) {
    for (uint64_t i = id * 0x9E3779B97F4A7C15ull >> 44, n = 0; n < SLOTS; i = (i + 1) & (SLOTS - 1), n++) {
        if (seen[i] == id) return;
        if (seen[i] == 0) { __atomic_store_n(&seen[i], id, __ATOMIC_RELEASE); return; }
    }
}
static int known(uint64_t id) {
    for (uint64_t i = id * 0x9E3779B97F4A7C15ull >> 44, n = 0; n < SLOTS; i = (i + 1) & (SLOTS - 1), n++) {
        uint64_t v = __atomic_load_n(&seen[i], __ATOMIC_ACQUIRE);
        if (v == id) return 1;
        if (v == 0) return 0;
    }
    return 0;
}

static int print_arg(offtrace_tracing_kind_t kind, offtrace_tracing_operation_t operation, uint32_t arg_number, const void* arg_value_addr,
                     int32_t arg_indirection_count, const char* arg_type, const char* arg_name, const char* arg_value_str,
                     int32_t arg_dereference_count, void* data) {
    (void)kind; (void)operation; (void)arg_value_addr; (void)arg_indirection_count; (void)arg_dereference_count; (void)data;
    printf("%s%s %s = %s", arg_number ? ", " : "(", arg_type, arg_name, arg_value_str);
    return 0;
}

static void on_call(offtrace_callback_tracing_record_t r, offtrace_user_data_t* user, void* data) {
    (void)data;
    if (r.phase == OFFTRACE_CALLBACK_PHASE_ENTER) {
        __atomic_fetch_add(&enters, 1, __ATOMIC_RELAXED);
        depth++;
        user->value = r.correlation_id.internal;
        remember(r.correlation_id.internal); /* launches report their kernel inside the call */
        if (r.correlation_id.external.value == TOOL_EXTERNAL_ID) __atomic_fetch_add(&calls_external, 1, __ATOMIC_RELAXED);
    } else if (r.phase == OFFTRACE_CALLBACK_PHASE_EXIT) {
        __atomic_fetch_add(&exits, 1, __ATOMIC_RELAXED);
        if (--depth < 0 || user->value != r.correlation_id.internal) __atomic_fetch_add(&unpaired, 1, __ATOMIC_RELAXED);
        const char* name = NULL;
        offtrace_query_callback_tracing_kind_operation_name(r.kind, r.operation, &name, NULL);
        if (name && strstr(name, "LaunchKernel") && __atomic_fetch_add(&printed, 1, __ATOMIC_RELAXED) < 2) {
            printf("cuda_tool: [CUDA_RUNTIME_API] %s (corr %" PRIu64 ") ", name, r.correlation_id.internal);
            offtrace_iterate_callback_tracing_kind_operation_args(r, print_arg, 0, NULL);
            printf(")\n");
        }
    }
}

/* Runs on offtrace's delivery thread. */
static void on_records(offtrace_context_id_t c, offtrace_buffer_id_t b,
                       const offtrace_buffer_tracing_record_t* const* records, size_t count, void* data,
                       uint64_t drop_count) {
    (void)c; (void)b; (void)data; (void)drop_count;
    for (size_t i = 0; i < count; i++) {
        if (records[i]->kind != OFFTRACE_TRACING_KIND_KERNEL_DISPATCH) continue;
        const offtrace_buffer_tracing_kernel_dispatch_record_t* r =
            (const offtrace_buffer_tracing_kernel_dispatch_record_t*)records[i];
        kernels++;
        if (!(r->device_start > 0 && r->device_end > r->device_start)) continue;
        kernels_timed++;
        if (known(r->header.correlation_id.internal)) kernels_correlated++;
        else kernels_uncorrelated++;
        if (r->header.correlation_id.external.value == TOOL_EXTERNAL_ID) kernels_external++;
    }
}

static int tool_init(offtrace_client_finalize_t fini, void* tool_data) {
    (void)fini; (void)tool_data;
    if (offtrace_create_context(&ctx) != OFFTRACE_STATUS_SUCCESS) return 1;
    if (offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_CUDA_RUNTIME_API, NULL, 0, on_call, NULL) !=
        OFFTRACE_STATUS_SUCCESS)
        return 1;
    const size_t rec = sizeof(offtrace_buffer_tracing_kernel_dispatch_record_t) + 256; /* with a name */
    if (offtrace_create_buffer(ctx, 4096 * rec, 2048 * rec, OFFTRACE_BUFFER_POLICY_LOSSLESS, on_records, NULL, &buffer) !=
        OFFTRACE_STATUS_SUCCESS)
        return 1;
    offtrace_configure_buffer_tracing_service(ctx, OFFTRACE_TRACING_KIND_KERNEL_DISPATCH, NULL, 0, buffer);
    offtrace_user_data_t ext = {.value = TOOL_EXTERNAL_ID};
    if (offtrace_push_external_correlation_id(ctx, 0, ext) != OFFTRACE_STATUS_SUCCESS) return 1;
    return offtrace_start_context(ctx) == OFFTRACE_STATUS_SUCCESS ? 0 : 1;
}

static void tool_fini(void* tool_data) {
    (void)tool_data;
    offtrace_flush_buffer(buffer);
    offtrace_stop_context(ctx);
    uint64_t dropped = 0;
    offtrace_buffer_get_dropped_count(buffer, &dropped);
    printf("cuda_tool: {\"enters\":%" PRIu64 ",\"exits\":%" PRIu64 ",\"unpaired\":%" PRIu64 ",\"kernels\":%" PRIu64
           ",\"kernels_timed\":%" PRIu64 ",\"kernels_correlated\":%" PRIu64 ",\"kernels_uncorrelated\":%" PRIu64
           ",\"dropped\":%" PRIu64 ",\"calls_external\":%" PRIu64 ",\"kernels_external\":%" PRIu64 "}\n",
           enters, exits, unpaired, kernels, kernels_timed, kernels_correlated, kernels_uncorrelated, dropped, calls_external,
           kernels_external);
    offtrace_destroy_context(ctx);
    fflush(stdout);
}

offtrace_tool_configure_result_t* offtrace_configure(uint32_t version, const char* runtime_version, uint32_t priority,
                                                     offtrace_client_id_t* client_id) {
    (void)version; (void)runtime_version; (void)priority;
    static offtrace_tool_configure_result_t result = {sizeof(offtrace_tool_configure_result_t), tool_init, tool_fini, NULL};
    client_id->name = "cuda_tool";
    return &result;
}
