/* A tool written against offtrace.h alone that exercises the lifecycle and consistency rules a
 * tool author relies on (issue 12). Prints one `key=value` line per check; tests/c_api.rs
 * (lifecycle_tool_*) and crates/offtrace-agent/tests/services_sycl.rs run it.
 *
 * LIFECYCLE_MODE:
 *   "ok" (default) - in initialize: configuring a started context, an absurd buffer size, the
 *       main thread's external stack (so its thread-local is live and later destroyed), a
 *       process-wide external id; UR_API callbacks + a buffer on the same calls: the external id
 *       of each call (an enter callback pushes a new one) is compared between enter, exit and
 *       buffer record. After LIFECYCLE_FINALIZE_AFTER exits (default 200) the tool calls
 *       client_finalize from inside its exit callback; finalize (deferred by offtrace) flushes,
 *       destroys a buffer, destroys the context while another thread and itself hold open
 *       marker ranges, and prints what it saw. A library destructor (inside exit(), after the
 *       main thread's thread-locals are gone) pushes and pops an external id. KERNEL_DISPATCH
 *       names and geometry are checked: readable, equal to a named CODE_OBJECT kernel load's
 *       (`unknown_names` counts those that are not), unused dimensions 1; `names=` lists them.
 *   "fail" - initialize creates and starts a context, then returns 5: no callback of it may run
 *       afterwards, and the context is destroyed.
 */
#include <offtrace/offtrace.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static offtrace_client_id_t me;
static offtrace_client_finalize_t client_finalize;
static offtrace_context_id_t ctx, late_ctx;
static offtrace_buffer_id_t buf, spare;
static int mode_fail;
static long finalize_after = 200;

static atomic_long enters, exits, exits_after_finalize_call, buffered, deliveries, mismatches;
static atomic_long ext_process, ext_pushed, after_fail_calls;
static atomic_int finalize_requested;

/* The calls whose enter callback pushes an id and whose exit callback pops it (UR function ids;
 * LIFECYCLE_PUSH_OP / LIFECYCLE_POP_OP override them). */
static uint32_t push_op = 48, pop_op = 97; /* urKernelCreate, urQueueFinish */
#define PROCESS_EXT 555
#define PUSHED_EXT 77

/* correlation id -> the external id of the call's enter (open addressing, under a lock) */
#define TABLE 65536
static struct { uint64_t corr, ext; } table[TABLE];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static void table_put(uint64_t corr, uint64_t ext) {
    pthread_mutex_lock(&table_lock);
    for (uint64_t i = corr % TABLE;; i = (i + 1) % TABLE) {
        if (table[i].corr == 0 || table[i].corr == corr) {
            table[i].corr = corr;
            table[i].ext = ext;
            break;
        }
    }
    pthread_mutex_unlock(&table_lock);
}

static int table_get(uint64_t corr, uint64_t* ext) {
    int found = 0;
    pthread_mutex_lock(&table_lock);
    for (uint64_t i = corr % TABLE; table[i].corr != 0; i = (i + 1) % TABLE) {
        if (table[i].corr == corr) {
            *ext = table[i].ext;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return found;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void on_call(offtrace_callback_tracing_record_t r, offtrace_user_data_t* user, void* data) {
    (void)data;
    if (mode_fail) {
        atomic_fetch_add(&after_fail_calls, 1);
        return;
    }
    uint64_t ext = r.correlation_id.external.value;
    if (r.phase == OFFTRACE_CALLBACK_PHASE_ENTER) {
        atomic_fetch_add(&enters, 1);
        user->value = ext;
        table_put(r.correlation_id.internal, ext);
        /* The rule under test: a push inside the enter callback applies to the calls after
         * this one, not to this call's exit or buffer record. */
        if (r.operation == push_op) offtrace_push_external_correlation_id(ctx, 0, (offtrace_user_data_t){PUSHED_EXT});
        return;
    }
    if (r.phase != OFFTRACE_CALLBACK_PHASE_EXIT) return;
    if (ext != user->value) atomic_fetch_add(&mismatches, 1);
    if (ext == PROCESS_EXT) atomic_fetch_add(&ext_process, 1);
    if (ext == PUSHED_EXT) atomic_fetch_add(&ext_pushed, 1);
    if (r.operation == pop_op) {
        offtrace_user_data_t v;
        offtrace_pop_external_correlation_id(ctx, 0, &v);
    }
    long n = atomic_fetch_add(&exits, 1) + 1;
    if (atomic_load(&finalize_requested)) atomic_fetch_add(&exits_after_finalize_call, 1);
    if (n == finalize_after && !atomic_exchange(&finalize_requested, 1)) {
        /* From inside a callback: offtrace defers it until this callback has returned. */
        client_finalize(me);
    }
}

static void on_buffer(offtrace_context_id_t c, offtrace_buffer_id_t b, const offtrace_buffer_tracing_record_t* const* recs,
                      size_t count, void* data, uint64_t drops) {
    (void)c; (void)b; (void)data; (void)drops;
    atomic_fetch_add(&deliveries, 1);
    for (size_t i = 0; i < count; i++) {
        uint64_t ext;
        if (!table_get(recs[i]->correlation_id.internal, &ext) || ext != recs[i]->correlation_id.external.value)
            atomic_fetch_add(&mismatches, 1);
    }
    atomic_fetch_add(&buffered, (long)count);
}

static void on_spare(offtrace_context_id_t c, offtrace_buffer_id_t b, const offtrace_buffer_tracing_record_t* const* recs,
                     size_t count, void* data, uint64_t drops) {
    (void)c; (void)b; (void)recs; (void)count; (void)data; (void)drops;
}

/* One answer per question: KERNEL_DISPATCH names are readable (not mangled), each one is the
 * name of a kernel a CODE_OBJECT load reported, and sizes past work_dim are 1. */
#define MAX_NAMES 64
static char kernel_names[MAX_NAMES][128];
static int kernel_name_count;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_long dispatches, mangled_names, unknown_names, geometry_bad, unnamed_kernel_loads;
static char dispatch_names[MAX_NAMES][128];
static int dispatch_name_count;

static void on_code_object(offtrace_callback_tracing_record_t r, offtrace_user_data_t* user, void* data) {
    (void)user; (void)data;
    const offtrace_callback_tracing_code_object_data_t* co = r.payload;
    if (r.operation != OFFTRACE_CODE_OBJECT_KERNEL || r.phase != OFFTRACE_CALLBACK_PHASE_LOAD || !co) return;
    if (!co->name) {
        atomic_fetch_add(&unnamed_kernel_loads, 1);
        return;
    }
    pthread_mutex_lock(&names_lock);
    if (kernel_name_count < MAX_NAMES) {
        strncpy(kernel_names[kernel_name_count], co->name, sizeof kernel_names[0] - 1);
        kernel_name_count++;
    }
    pthread_mutex_unlock(&names_lock);
}

static void on_dispatch(offtrace_callback_tracing_record_t r, offtrace_user_data_t* user, void* data) {
    (void)user; (void)data;
    const offtrace_callback_tracing_kernel_dispatch_data_t* k = r.payload;
    if (r.phase != OFFTRACE_CALLBACK_PHASE_NONE || !k) return;
    atomic_fetch_add(&dispatches, 1);
    const char* n = k->kernel_name ? k->kernel_name : "";
    if (strncmp(n, "_Z", 2) == 0 || strstr(n, "typeinfo") != NULL) atomic_fetch_add(&mangled_names, 1);
    int known = 0, seen = 0;
    pthread_mutex_lock(&names_lock);
    for (int i = 0; i < kernel_name_count; i++) known |= strcmp(kernel_names[i], n) == 0;
    for (int i = 0; i < dispatch_name_count; i++) seen |= strcmp(dispatch_names[i], n) == 0;
    if (!seen && dispatch_name_count < MAX_NAMES) {
        strncpy(dispatch_names[dispatch_name_count], n, sizeof dispatch_names[0] - 1);
        dispatch_name_count++;
    }
    pthread_mutex_unlock(&names_lock);
    if (!known) atomic_fetch_add(&unknown_names, 1);
    for (uint32_t d = k->work_dim; d < 3 && k->work_dim > 0; d++) {
        if (k->global_size[d] != 1) atomic_fetch_add(&geometry_bad, 1);
        if ((k->local_size[0] | k->local_size[1] | k->local_size[2]) != 0 && k->local_size[d] != 1)
            atomic_fetch_add(&geometry_bad, 1);
    }
}

static void on_marker(offtrace_callback_tracing_record_t r, offtrace_user_data_t* user, void* data) {
    (void)r; (void)user; (void)data;
    if (mode_fail) atomic_fetch_add(&after_fail_calls, 1);
}

static int tool_init(offtrace_client_finalize_t fini, void* data) {
    (void)data;
    client_finalize = fini;
    if (offtrace_create_context(&ctx) != 0) return 1;
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_MARKER, NULL, 0, on_marker, NULL);
    if (mode_fail) {
        offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_UR_API, NULL, 0, on_call, NULL);
        offtrace_start_context(ctx);
        printf("fail_init_started=1\n");
        return 5;
    }
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_UR_API, NULL, 0, on_call, NULL);
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_CODE_OBJECT, NULL, 0, on_code_object, NULL);
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_KERNEL_DISPATCH, NULL, 0, on_dispatch, NULL);
    offtrace_status_t s = offtrace_create_buffer(ctx, (size_t)1 << 62, 0, OFFTRACE_BUFFER_POLICY_LOSSLESS, on_buffer,
                                                 NULL, &buf);
    printf("huge_buffer=%d\n", s);
    offtrace_create_buffer(ctx, 64 * sizeof(offtrace_buffer_tracing_record_t), 32 * sizeof(offtrace_buffer_tracing_record_t),
                           OFFTRACE_BUFFER_POLICY_LOSSLESS, on_buffer, NULL, &buf);
    offtrace_configure_buffer_tracing_service(ctx, OFFTRACE_TRACING_KIND_UR_API, NULL, 0, buf);
    offtrace_create_buffer(ctx, 4096, 0, OFFTRACE_BUFFER_POLICY_DISCARD, on_spare, NULL, &spare);
    offtrace_start_context(ctx);
    s = offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_MEMORY_FILL, NULL, 0, on_call, NULL);
    printf("configure_started=%d\n", s);
    s = offtrace_configure_buffer_tracing_service(ctx, OFFTRACE_TRACING_KIND_MEMORY_COPY, NULL, 0, buf);
    printf("configure_buffer_started=%d\n", s);
    s = offtrace_destroy_buffer(spare);
    printf("destroy_buffer_started=%d\n", s);
    /* The main thread's external stack is used now, so its thread-local exists and is
     * destroyed at exit before the library destructor below runs. */
    offtrace_push_external_correlation_id(ctx, 0, (offtrace_user_data_t){1});
    offtrace_push_external_correlation_id(ctx, 0, (offtrace_user_data_t){2});
    offtrace_user_data_t v = {0};
    offtrace_pop_external_correlation_id(ctx, 0, &v);
    offtrace_pop_external_correlation_id(ctx, 0, &v);
    offtrace_set_process_external_correlation_id(ctx, (offtrace_user_data_t){PROCESS_EXT});
    offtrace_create_context(&late_ctx);
    fflush(stdout);
    return 0;
}

static atomic_int holder_ready;

static void* hold_range(void* arg) {
    (void)arg;
    offtrace_marker_range_push("held by another thread");
    atomic_store(&holder_ready, 1);
    sleep(3);
    offtrace_marker_range_pop();
    return NULL;
}

static void tool_fini(void* data) {
    (void)data;
    long exits_at_finalize = atomic_load(&exits);
    pthread_t holder;
    pthread_create(&holder, NULL, hold_range, NULL);
    struct timespec ms = {0, 1000000};
    while (!atomic_load(&holder_ready)) nanosleep(&ms, NULL);
    offtrace_status_t flush = offtrace_flush_buffer(buf);
    offtrace_stop_context(ctx);
    offtrace_status_t db = offtrace_destroy_buffer(spare);
    offtrace_status_t db_again = offtrace_flush_buffer(spare);
    offtrace_marker_range_push("held by the finalizing thread");
    double t0 = now_s();
    offtrace_status_t d = offtrace_destroy_context(ctx);
    double took = now_s() - t0;
    offtrace_marker_range_pop();
    printf("finalize flush=%d destroy_buffer=%d flush_destroyed=%d destroy_context=%d destroy_bounded=%d "
           "exits_at_finalize=%ld\n",
           flush, db, db_again, d, took < 2.0, exits_at_finalize);
    printf("enters=%ld exits=%ld buffered=%ld deliveries_lt_records=%d mismatches=%ld ext_process=%ld ext_pushed=%ld\n",
           atomic_load(&enters), atomic_load(&exits), atomic_load(&buffered),
           atomic_load(&deliveries) < atomic_load(&buffered), atomic_load(&mismatches), atomic_load(&ext_process),
           atomic_load(&ext_pushed));
    printf("dispatches=%ld mangled_names=%ld unknown_names=%ld geometry_bad=%ld unnamed_kernel_loads=%ld names=",
           atomic_load(&dispatches), atomic_load(&mangled_names), atomic_load(&unknown_names),
           atomic_load(&geometry_bad), atomic_load(&unnamed_kernel_loads));
    for (int i = 0; i < dispatch_name_count; i++) printf("%s%s", i ? "," : "", dispatch_names[i]);
    printf("\n");
    fflush(stdout);
    pthread_join(holder, NULL);
}

__attribute__((destructor)) static void at_unload(void) {
    if (mode_fail) {
        int active = -1;
        offtrace_status_t s = offtrace_context_is_active(ctx, &active);
        printf("after_fail callbacks=%ld context_status=%d\n", atomic_load(&after_fail_calls), s);
        fflush(stdout);
        return;
    }
    if (late_ctx.handle == 0) return;
    /* Inside exit(): the main thread's thread-locals are destroyed by now. */
    offtrace_status_t p1 = offtrace_push_external_correlation_id(late_ctx, 0, (offtrace_user_data_t){9});
    offtrace_status_t p2 = offtrace_push_external_correlation_id(late_ctx, 0, (offtrace_user_data_t){10});
    offtrace_user_data_t a = {0}, b = {0};
    offtrace_status_t q1 = offtrace_pop_external_correlation_id(late_ctx, 0, &a);
    offtrace_status_t q2 = offtrace_pop_external_correlation_id(late_ctx, 0, &b);
    offtrace_status_t q3 = offtrace_pop_external_correlation_id(late_ctx, 0, &b);
    printf("late push=%d,%d pop=%d,%d,%d values=%llu,%llu\n", p1, p2, q1, q2, q3, (unsigned long long)a.value,
           (unsigned long long)b.value);
    fflush(stdout);
}

static offtrace_tool_configure_result_t result = {sizeof(offtrace_tool_configure_result_t), tool_init, tool_fini, NULL};

offtrace_tool_configure_result_t* offtrace_configure(uint32_t version, const char* runtime_version, uint32_t priority,
                                                     offtrace_client_id_t* client_id) {
    (void)runtime_version; (void)priority;
    if (version < OFFTRACE_VERSION_ENCODE(0, 1, 0)) return NULL;
    const char* m = getenv("LIFECYCLE_MODE");
    mode_fail = m && strcmp(m, "fail") == 0;
    if (getenv("LIFECYCLE_FINALIZE_AFTER")) finalize_after = atol(getenv("LIFECYCLE_FINALIZE_AFTER"));
    if (getenv("LIFECYCLE_PUSH_OP")) push_op = (uint32_t)atol(getenv("LIFECYCLE_PUSH_OP"));
    if (getenv("LIFECYCLE_POP_OP")) pop_op = (uint32_t)atol(getenv("LIFECYCLE_POP_OP"));
    client_id->name = "lifecycle-tool";
    me = *client_id;
    return &result;
}
