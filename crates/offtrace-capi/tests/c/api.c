/* Every function of offtrace.h and its error codes, driven by the mock backend. */
#define _DEFAULT_SOURCE /* usleep */
#include <offtrace/offtrace.h>
#include <offtrace/offtrace_testing.h>

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                          \
        }                                                                        \
    } while (0)
#define OK(call) CHECK((call) == OFFTRACE_STATUS_SUCCESS)

enum { UR_MEMCPY = 33, UR_KERNEL_CREATE = 48, UR_QUEUE_FINISH = 97, UR_USM_DEVICE_ALLOC = 108 };

typedef struct {
    int enters, exits, bad_user_data;
    uint64_t last_corr, last_external;
    int32_t last_result;
    char args[1024];
    uint32_t allocs;
    offtrace_kernel_allocation_properties_t props[8];
    int loads, unloads;
} seen_t;

static int print_arg(offtrace_tracing_kind_t kind, offtrace_tracing_operation_t op, uint32_t n, const void* addr,
                     int32_t indirection, const char* type, const char* name, const char* value, int32_t deref,
                     void* data) {
    seen_t* s = (seen_t*)data;
    (void)kind; (void)op; (void)addr; (void)deref;
    size_t len = strlen(s->args);
    snprintf(s->args + len, sizeof s->args - len, "%u:%s %s=%s(%d);", n, type, name, value, indirection);
    return 0;
}

static void on_ur(offtrace_callback_tracing_record_t r, offtrace_user_data_t* user, void* data) {
    seen_t* s = (seen_t*)data;
    if (r.phase == OFFTRACE_CALLBACK_PHASE_ENTER) {
        s->enters++;
        user->value = r.correlation_id.internal + 1000;
    } else {
        s->exits++;
        if (user->value != r.correlation_id.internal + 1000) s->bad_user_data++;
        const offtrace_callback_tracing_ur_api_data_t* p = r.payload;
        s->last_result = p->result;
        s->last_corr = r.correlation_id.internal;
        s->last_external = r.correlation_id.external.value;
        s->args[0] = 0;
        CHECK(offtrace_iterate_callback_tracing_kind_operation_args(r, print_arg, 1, s) == OFFTRACE_STATUS_SUCCESS);
        CHECK(offtrace_iterate_callback_tracing_kind_operation_args(r, NULL, 1, s) ==
              OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
        /* Not allowed inside a callback. */
        CHECK(offtrace_destroy_context(r.context_id) == OFFTRACE_STATUS_ERROR_BUSY);
    }
}

static void on_dispatch(offtrace_callback_tracing_record_t r, offtrace_user_data_t* user, void* data) {
    seen_t* s = (seen_t*)data;
    (void)user;
    uint32_t count = 0;
    CHECK(offtrace_kernel_get_allocation_properties(&r, &count, NULL) == OFFTRACE_STATUS_SUCCESS);
    s->allocs = count;
    if (count > 8) count = 8;
    CHECK(offtrace_kernel_get_allocation_properties(&r, &count, s->props) == OFFTRACE_STATUS_SUCCESS);
    uint32_t one = 1;
    offtrace_kernel_allocation_properties_t first;
    CHECK(offtrace_kernel_get_allocation_properties(&r, &one, &first) == OFFTRACE_STATUS_SUCCESS && one == 1);
    CHECK(offtrace_kernel_get_allocation_properties(&r, NULL, NULL) == OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
}

static void on_code_object(offtrace_callback_tracing_record_t r, offtrace_user_data_t* user, void* data) {
    seen_t* s = (seen_t*)data;
    (void)user;
    if (r.phase == OFFTRACE_CALLBACK_PHASE_LOAD) s->loads++;
    if (r.phase == OFFTRACE_CALLBACK_PHASE_UNLOAD) s->unloads++;
    /* Not a dispatch record. */
    uint32_t count = 0;
    CHECK(offtrace_kernel_get_allocation_properties(&r, &count, NULL) == OFFTRACE_STATUS_ERROR_KIND_NOT_FOUND);
}

static void noop_cb(offtrace_callback_tracing_record_t r, offtrace_user_data_t* u, void* d) { (void)r; (void)u; (void)d; }
static void noop_buffer(offtrace_context_id_t c, offtrace_buffer_id_t b, const offtrace_buffer_tracing_record_t* const* r,
                        size_t n, void* d, uint64_t drops) { (void)c; (void)b; (void)r; (void)n; (void)d; (void)drops; }

static int count_kinds(offtrace_tracing_kind_t kind, void* data) { (void)kind; ++*(int*)data; return 0; }
static int first_kind_only(offtrace_tracing_kind_t kind, void* data) { (void)kind; ++*(int*)data; return 1; }
static int count_ops(offtrace_tracing_kind_t kind, offtrace_tracing_operation_t op, void* data) {
    (void)kind; (void)op; ++*(int*)data; return 0;
}

/* Written by the delivery thread; `calls` last (release), read first (acquire). */
typedef struct { size_t records; uint64_t drops; int calls; uint64_t ext; pthread_t thread; int bad; } buf_seen_t;
static void on_buffer(offtrace_context_id_t c, offtrace_buffer_id_t b, const offtrace_buffer_tracing_record_t* const* r,
                      size_t n, void* d, uint64_t drops) {
    buf_seen_t* s = (buf_seen_t*)d;
    (void)c;
    s->records += n;
    s->drops += drops;
    s->thread = pthread_self();
    for (size_t i = 0; i < n; i++) {
        /* The mock's UR call: an API call record with its one argument inline. */
        const offtrace_buffer_tracing_api_call_record_t* a = (const offtrace_buffer_tracing_api_call_record_t*)r[i];
        const uint64_t* args = (const uint64_t*)OFFTRACE_BUFFER_RECORD_AT(a, a->args_offset);
        if (a->header.kind != OFFTRACE_TRACING_KIND_UR_API || a->header.size != sizeof *a + 8 || a->arg_count != 1 ||
            args[0] != 0x1000 || a->header.phase != OFFTRACE_CALLBACK_PHASE_NONE ||
            a->header.end_timestamp < a->header.start_timestamp)
            s->bad++;
    }
    if (n) s->ext = r[n - 1]->correlation_id.external.value;
    if (offtrace_flush_buffer(b) != OFFTRACE_STATUS_ERROR_BUSY) s->bad++;
    __atomic_fetch_add(&s->calls, 1, __ATOMIC_RELEASE);
}

/* A typed KERNEL_DISPATCH buffer record: name, geometry, arguments inline, and its allocation
 * properties from its argument values. */
typedef struct { int calls, records, allocs, named, args_ok, not_dispatch, null_count; } kbuf_seen_t;
static void on_kernel_buffer(offtrace_context_id_t c, offtrace_buffer_id_t b,
                             const offtrace_buffer_tracing_record_t* const* r, size_t n, void* d, uint64_t drops) {
    kbuf_seen_t* s = (kbuf_seen_t*)d;
    (void)c; (void)b; (void)drops;
    for (size_t i = 0; i < n; i++) {
        const offtrace_buffer_tracing_kernel_dispatch_record_t* k = (const void*)r[i];
        s->records++;
        uint32_t count = 0;
        if (offtrace_buffer_kernel_get_allocation_properties(r[i], &count, NULL) == OFFTRACE_STATUS_SUCCESS)
            s->allocs = (int)count;
        offtrace_kernel_allocation_properties_t props[4];
        count = 4;
        if (offtrace_buffer_kernel_get_allocation_properties(r[i], &count, props) != OFFTRACE_STATUS_SUCCESS ||
            count != 2 || props[0].base != 0x50000000 || props[0].arg_index != 0 || props[1].base != 0x60000000 ||
            props[1].arg_index != 2)
            s->allocs = -1;
        if (k->name_offset && strcmp((const char*)OFFTRACE_BUFFER_RECORD_AT(k, k->name_offset), "k") == 0) s->named++;
        const uint64_t* args = (const uint64_t*)OFFTRACE_BUFFER_RECORD_AT(k, k->args_offset);
        if (k->kernel_arg_count == 4 && args[0] == 0x50000010 && args[1] == 7 && args[3] == 0x50000020) s->args_ok++;
        if (offtrace_buffer_kernel_get_allocation_properties(r[i], NULL, NULL) == OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT)
            s->null_count++;
    }
    offtrace_buffer_tracing_record_t other = {.size = 64, .kind = OFFTRACE_TRACING_KIND_UR_API};
    uint32_t count = 0;
    if (offtrace_buffer_kernel_get_allocation_properties(&other, &count, NULL) == OFFTRACE_STATUS_ERROR_KIND_NOT_FOUND)
        s->not_dispatch++;
    __atomic_fetch_add(&s->calls, 1, __ATOMIC_RELEASE);
}

/* Deliveries run on offtrace's delivery thread: waits (at most 10 s) until `calls` is reached. */
static int wait_calls(buf_seen_t* s, int calls) {
    for (int i = 0; i < 10000 && __atomic_load_n(&s->calls, __ATOMIC_ACQUIRE) < calls; i++) usleep(1000);
    return __atomic_load_n(&s->calls, __ATOMIC_ACQUIRE);
}

int main(void) {
    uint32_t major = 9, minor = 9, patch = 9;
    OK(offtrace_get_version(&major, &minor, &patch));
    CHECK(major == 0 && minor == 2);
    CHECK(strstr(offtrace_get_status_string(OFFTRACE_STATUS_ERROR_SERVICE_ALREADY_CONFIGURED), "ALREADY") != NULL);
    CHECK(strcmp(offtrace_get_status_string(999), "unknown status") == 0);
    OK(offtrace_testing_register_mock_ur_table());

    /* Queries. */
    const char* name = NULL;
    uint64_t len = 0;
    OK(offtrace_query_callback_tracing_kind_name(OFFTRACE_TRACING_KIND_UR_API, &name, &len));
    CHECK(strcmp(name, "UR_API") == 0 && len == 6);
    OK(offtrace_query_callback_tracing_kind_name(OFFTRACE_TRACING_KIND_KERNEL_DISPATCH, &name, NULL));
    CHECK(strcmp(name, "KERNEL_DISPATCH") == 0);
    CHECK(offtrace_query_callback_tracing_kind_name(0, &name, &len) == OFFTRACE_STATUS_ERROR_KIND_NOT_FOUND);
    CHECK(offtrace_query_callback_tracing_kind_name(1, NULL, NULL) == OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
    OK(offtrace_query_callback_tracing_kind_operation_name(OFFTRACE_TRACING_KIND_UR_API, UR_QUEUE_FINISH, &name, &len));
    CHECK(strcmp(name, "urQueueFinish") == 0 && len == 13);
    OK(offtrace_query_callback_tracing_kind_operation_name(OFFTRACE_TRACING_KIND_TASK_GRAPH, OFFTRACE_TASK_GRAPH_SIGNAL, &name, NULL));
    CHECK(strcmp(name, "signal") == 0);
    CHECK(offtrace_query_callback_tracing_kind_operation_name(OFFTRACE_TRACING_KIND_UR_API, 5000, &name, &len) ==
          OFFTRACE_STATUS_ERROR_OPERATION_NOT_FOUND);
    int kinds = 0;
    OK(offtrace_iterate_callback_tracing_kinds(count_kinds, &kinds));
    CHECK(kinds == OFFTRACE_TRACING_KIND_LAST - 1);
    kinds = 0;
    OK(offtrace_iterate_callback_tracing_kinds(first_kind_only, &kinds));
    CHECK(kinds == 1);
    CHECK(offtrace_iterate_callback_tracing_kinds(NULL, NULL) == OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
    int ops = 0;
    OK(offtrace_iterate_callback_tracing_kind_operations(OFFTRACE_TRACING_KIND_UR_API, count_ops, &ops));
    CHECK(ops == 4);
    ops = 0;
    OK(offtrace_iterate_callback_tracing_kind_operations(OFFTRACE_TRACING_KIND_CODE_OBJECT, count_ops, &ops));
    CHECK(ops == 3);
    CHECK(offtrace_iterate_callback_tracing_kind_operations(77, count_ops, &ops) == OFFTRACE_STATUS_ERROR_KIND_NOT_FOUND);

    offtrace_timestamp_t t0 = 0, t1 = 0;
    OK(offtrace_get_timestamp(&t0));
    OK(offtrace_get_timestamp(&t1));
    CHECK(t0 > 0 && t1 >= t0);
    CHECK(offtrace_get_timestamp(NULL) == OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
    offtrace_thread_id_t tid = 0;
    OK(offtrace_get_thread_id(&tid));
    CHECK(tid > 0);

    /* Contexts and callback tracing. */
    CHECK(offtrace_create_context(NULL) == OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
    offtrace_context_id_t ctx;
    OK(offtrace_create_context(&ctx));
    offtrace_context_id_t bogus = {12345};
    CHECK(offtrace_start_context(bogus) == OFFTRACE_STATUS_ERROR_CONTEXT_INVALID);
    CHECK(offtrace_stop_context(bogus) == OFFTRACE_STATUS_ERROR_CONTEXT_INVALID);
    CHECK(offtrace_destroy_context(bogus) == OFFTRACE_STATUS_ERROR_CONTEXT_INVALID);
    seen_t seen;
    memset(&seen, 0, sizeof seen);
    OK(offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_UR_API, NULL, 0, on_ur, &seen));
    CHECK(offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_UR_API, NULL, 0, on_ur, &seen) ==
          OFFTRACE_STATUS_ERROR_SERVICE_ALREADY_CONFIGURED);
    CHECK(offtrace_configure_callback_tracing_service(ctx, 99, NULL, 0, on_ur, &seen) == OFFTRACE_STATUS_ERROR_KIND_NOT_FOUND);
    CHECK(offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_SYNC, NULL, 0, NULL, NULL) ==
          OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
    CHECK(offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_SYNC, NULL, 2, noop_cb, NULL) ==
          OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
    offtrace_tracing_operation_t bad_ops[] = {OFFTRACE_SYNC_WAIT, 42};
    CHECK(offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_SYNC, bad_ops, 2, noop_cb, NULL) ==
          OFFTRACE_STATUS_ERROR_OPERATION_NOT_FOUND);
    OK(offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_KERNEL_DISPATCH, NULL, 0, on_dispatch, &seen));
    offtrace_tracing_operation_t kernel_only[] = {OFFTRACE_CODE_OBJECT_KERNEL};
    OK(offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_CODE_OBJECT, kernel_only, 1, on_code_object, &seen));

    int active = -1;
    OK(offtrace_context_is_active(ctx, &active));
    CHECK(active == 0);
    CHECK(offtrace_context_is_active(ctx, NULL) == OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
    uint64_t a1[] = {0x1000};
    CHECK(offtrace_testing_emit_ur_call(UR_QUEUE_FINISH, a1, 1, 0) == 0); /* stopped: nobody sees it */
    OK(offtrace_start_context(ctx));
    OK(offtrace_start_context(ctx)); /* idempotent */
    OK(offtrace_context_is_active(ctx, &active));
    CHECK(active == 1);

    uint64_t corr = offtrace_testing_emit_ur_call(UR_QUEUE_FINISH, a1, 1, 0);
    CHECK(corr != 0 && seen.enters == 1 && seen.exits == 1 && seen.last_corr == corr && seen.bad_user_data == 0);
    CHECK(strcmp(seen.args, "0:ur_queue_handle_t hQueue=0x1000(0);") == 0);

    const char* kname = "vector_add";
    uint64_t a2[] = {0xabc, (uint64_t)(uintptr_t)kname, 0x7ffd0000};
    offtrace_testing_emit_ur_call(UR_KERNEL_CREATE, a2, 3, 0);
    CHECK(strcmp(seen.args, "0:ur_program_handle_t hProgram=0xabc(0);1:const char * pKernelName=\"vector_add\"(1);"
                            "2:ur_kernel_handle_t * phKernel=0x7ffd0000(1);") == 0);
    uint64_t a3[] = {0x10, 0x20, 0, 0, 4096, 0x7ffd0008};
    offtrace_testing_emit_ur_call(UR_USM_DEVICE_ALLOC, a3, 6, -3);
    CHECK(seen.last_result == -3);
    CHECK(strstr(seen.args, "4:size_t size=4096(0);5:void ** ppMem=0x7ffd0008(2);") != NULL);

    /* External correlation ids. */
    offtrace_user_data_t ext = {.value = 4242};
    OK(offtrace_push_external_correlation_id(ctx, 0, ext));
    offtrace_testing_emit_ur_call(UR_QUEUE_FINISH, a1, 1, 0);
    CHECK(seen.last_external == 4242);
    offtrace_user_data_t popped = {.value = 0};
    CHECK(offtrace_push_external_correlation_id(ctx, tid + 1, ext) == OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
    OK(offtrace_pop_external_correlation_id(ctx, tid, &popped));
    CHECK(popped.value == 4242);
    CHECK(offtrace_pop_external_correlation_id(ctx, 0, &popped) == OFFTRACE_STATUS_ERROR_STACK_EMPTY);
    CHECK(offtrace_push_external_correlation_id(bogus, 0, ext) == OFFTRACE_STATUS_ERROR_CONTEXT_INVALID);

    /* Kernel allocation properties. */
    OK(offtrace_testing_emit_memory_alloc(0x50000000, 65536, OFFTRACE_MEMORY_TYPE_SHARED));
    OK(offtrace_testing_emit_memory_alloc(0x60000000, 1024, OFFTRACE_MEMORY_TYPE_DEVICE));
    uint64_t kargs[] = {0x50000010, 7, 0x60000000, 0x50000020};
    OK(offtrace_testing_emit_kernel_dispatch(0x99, "k", kargs, 4, 0xfff00000, 4096));
    CHECK(seen.allocs == 3);
    CHECK(seen.props[0].base == 0x50000000 && seen.props[0].size == 65536 && seen.props[0].arg_index == 0 &&
          seen.props[0].type == OFFTRACE_MEMORY_TYPE_SHARED);
    CHECK(seen.props[1].base == 0x60000000 && seen.props[1].arg_index == 2 && seen.props[1].type == OFFTRACE_MEMORY_TYPE_DEVICE);
    CHECK(seen.props[2].base == 0xfff00000 && seen.props[2].arg_index == -1 && seen.props[2].type == OFFTRACE_MEMORY_TYPE_UNKNOWN);
    OK(offtrace_testing_emit_memory_free(0x60000000));
    OK(offtrace_testing_emit_kernel_dispatch(0x99, "k", kargs, 4, 0, 0));
    CHECK(seen.allocs == 1);
    OK(offtrace_testing_emit_memory_free(0x50000000));

    /* Code objects: only the filtered operation, as load/unload. */
    OK(offtrace_testing_emit_code_object(OFFTRACE_CODE_OBJECT_PROGRAM, 1, 1, "prog"));
    OK(offtrace_testing_emit_code_object(OFFTRACE_CODE_OBJECT_KERNEL, 1, 2, "k"));
    OK(offtrace_testing_emit_code_object(OFFTRACE_CODE_OBJECT_KERNEL, 0, 2, "k"));
    CHECK(seen.loads == 1 && seen.unloads == 1);

    /* Buffers. */
    buf_seen_t bs;
    memset(&bs, 0, sizeof bs);
    offtrace_buffer_id_t buf;
    /* The mock's UR_QUEUE_FINISH record: the API call record and its one argument. */
    const size_t rec = sizeof(offtrace_buffer_tracing_api_call_record_t) + 8;
    CHECK(sizeof(offtrace_buffer_tracing_record_t) == 64 && rec == 88);
    CHECK(offtrace_create_buffer(ctx, 16 * rec, 8 * rec, 7, on_buffer, &bs, &buf) == OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
    CHECK(offtrace_create_buffer(ctx, 16 * rec, 8 * rec, OFFTRACE_BUFFER_POLICY_LOSSLESS, NULL, &bs, &buf) ==
          OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
    CHECK(offtrace_create_buffer(ctx, 16 * rec, 8 * rec, OFFTRACE_BUFFER_POLICY_LOSSLESS, on_buffer, &bs, NULL) ==
          OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
    CHECK(offtrace_create_buffer(ctx, 16 * rec, 32 * rec, OFFTRACE_BUFFER_POLICY_LOSSLESS, on_buffer, &bs, &buf) ==
          OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
    CHECK(offtrace_create_buffer(bogus, 16 * rec, 8 * rec, OFFTRACE_BUFFER_POLICY_LOSSLESS, on_buffer, &bs, &buf) ==
          OFFTRACE_STATUS_ERROR_CONTEXT_INVALID);
    OK(offtrace_create_buffer(ctx, 16 * rec, 8 * rec, OFFTRACE_BUFFER_POLICY_LOSSLESS, on_buffer, &bs, &buf));
    offtrace_buffer_id_t nobuf = {0};
    CHECK(offtrace_configure_buffer_tracing_service(ctx, OFFTRACE_TRACING_KIND_UR_API, NULL, 0, nobuf) ==
          OFFTRACE_STATUS_ERROR_BUFFER_NOT_FOUND);
    /* A started context's configuration is locked. */
    CHECK(offtrace_configure_buffer_tracing_service(ctx, OFFTRACE_TRACING_KIND_UR_API, NULL, 0, buf) ==
          OFFTRACE_STATUS_ERROR_CONTEXT_ACTIVE);
    CHECK(offtrace_create_buffer(ctx, (size_t)1 << 62, 0, OFFTRACE_BUFFER_POLICY_LOSSLESS, on_buffer, &bs, &nobuf) ==
          OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
    OK(offtrace_stop_context(ctx));
    OK(offtrace_configure_buffer_tracing_service(ctx, OFFTRACE_TRACING_KIND_UR_API, NULL, 0, buf));
    CHECK(offtrace_configure_buffer_tracing_service(ctx, OFFTRACE_TRACING_KIND_UR_API, NULL, 0, buf) ==
          OFFTRACE_STATUS_ERROR_SERVICE_ALREADY_CONFIGURED);
    OK(offtrace_start_context(ctx));
    OK(offtrace_push_external_correlation_id(ctx, 0, ext));
    for (int i = 0; i < 7; i++) offtrace_testing_emit_ur_call(UR_QUEUE_FINISH, a1, 1, 0);
    usleep(20000);
    CHECK(wait_calls(&bs, 0) == 0); /* below the watermark */
    offtrace_testing_emit_ur_call(UR_QUEUE_FINISH, a1, 1, 0);
    CHECK(wait_calls(&bs, 1) == 1 && bs.records == 8); /* at the watermark, on the delivery thread */
    CHECK(!pthread_equal(bs.thread, pthread_self()));
    offtrace_testing_emit_ur_call(UR_QUEUE_FINISH, a1, 1, 0);
    OK(offtrace_flush_buffer(buf)); /* returns when delivered */
    CHECK(__atomic_load_n(&bs.calls, __ATOMIC_ACQUIRE) == 2 && bs.records == 9 && bs.drops == 0 && bs.ext == 4242);
    CHECK(bs.bad == 0);
    CHECK(offtrace_flush_buffer(nobuf) == OFFTRACE_STATUS_ERROR_BUFFER_NOT_FOUND);
    uint64_t dropped = 99;
    OK(offtrace_buffer_get_dropped_count(buf, &dropped));
    CHECK(dropped == 0);
    CHECK(offtrace_buffer_get_dropped_count(buf, NULL) == OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT);
    OK(offtrace_pop_external_correlation_id(ctx, 0, NULL));

    /* Typed KERNEL_DISPATCH buffer records and their allocation properties. */
    {
        offtrace_context_id_t kctx;
        offtrace_buffer_id_t kbuf;
        kbuf_seen_t ks;
        memset(&ks, 0, sizeof ks);
        OK(offtrace_create_context(&kctx));
        OK(offtrace_create_buffer(kctx, 1 << 16, 1 << 15, OFFTRACE_BUFFER_POLICY_LOSSLESS, on_kernel_buffer, &ks, &kbuf));
        OK(offtrace_configure_buffer_tracing_service(kctx, OFFTRACE_TRACING_KIND_KERNEL_DISPATCH, NULL, 0, kbuf));
        OK(offtrace_start_context(kctx));
        OK(offtrace_testing_emit_memory_alloc(0x50000000, 65536, OFFTRACE_MEMORY_TYPE_SHARED));
        OK(offtrace_testing_emit_memory_alloc(0x60000000, 1024, OFFTRACE_MEMORY_TYPE_DEVICE));
        OK(offtrace_testing_emit_kernel_dispatch(0x99, "k", kargs, 4, 0xfff00000, 4096));
        OK(offtrace_flush_buffer(kbuf));
        CHECK(__atomic_load_n(&ks.calls, __ATOMIC_ACQUIRE) == 1 && ks.records == 1);
        CHECK(ks.allocs == 2 && ks.named == 1 && ks.args_ok == 1 && ks.not_dispatch == 1 && ks.null_count == 1);
        OK(offtrace_testing_emit_memory_free(0x60000000));
        OK(offtrace_testing_emit_memory_free(0x50000000));
        OK(offtrace_destroy_context(kctx));
    }

    /* Markers. */
    CHECK(offtrace_marker_range_push("outer") == 0);
    CHECK(offtrace_marker_range_push(NULL) == 1);
    offtrace_marker_mark("here");
    CHECK(offtrace_marker_range_pop() == 1);
    CHECK(offtrace_marker_range_pop() == 0);
    CHECK(offtrace_marker_range_pop() == -1);

    /* Stop, then destroy. */
    OK(offtrace_stop_context(ctx));
    int before = seen.enters;
    offtrace_testing_emit_ur_call(UR_QUEUE_FINISH, a1, 1, 0);
    CHECK(seen.enters == before);
    OK(offtrace_destroy_context(ctx));
    CHECK(offtrace_start_context(ctx) == OFFTRACE_STATUS_ERROR_CONTEXT_INVALID);
    CHECK(offtrace_flush_buffer(buf) == OFFTRACE_STATUS_ERROR_BUFFER_NOT_FOUND);

    /* Slots run out at 8 contexts and come back after destroy. */
    offtrace_context_id_t many[9];
    int made = 0;
    while (made < 9 && offtrace_create_context(&many[made]) == OFFTRACE_STATUS_SUCCESS) made++;
    CHECK(made == 8);
    offtrace_context_id_t extra;
    CHECK(offtrace_create_context(&extra) == OFFTRACE_STATUS_ERROR_OUT_OF_RESOURCES);
    for (int i = 0; i < made; i++) OK(offtrace_destroy_context(many[i]));
    OK(offtrace_create_context(&extra));
    OK(offtrace_configure_buffer_tracing_service(extra, OFFTRACE_TRACING_KIND_MARKER, NULL, 0, buf) == OFFTRACE_STATUS_ERROR_BUFFER_NOT_FOUND
           ? OFFTRACE_STATUS_SUCCESS : OFFTRACE_STATUS_ERROR);
    offtrace_buffer_id_t other;
    OK(offtrace_create_buffer(extra, 4 * rec, rec, OFFTRACE_BUFFER_POLICY_DISCARD, noop_buffer, NULL, &other));
    OK(offtrace_destroy_context(extra));

    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("api: all checks passed\n");
    return 0;
}
