/* services_check: a test tool for the SYCL/UR backend of the tracing services. Subscribes every
 * kind with one callback and checks, per thread, that every ENTER has its EXIT (same correlation
 * id, LIFO) and that records emitted inside a UR call carry that call's correlation id. Prints
 * one summary block at finalize, parsed by tests/services_sycl.rs:
 *
 *   kind <NAME> enter=<n> exit=<n> instant=<n> load=<n> unload=<n>
 *   unmatched_exit=<n> open_at_end=<n> foreign_correlation=<n>
 *   dispatch name=<kernel> corr=<id> ur_corr=<id> args=<n> allocs=<n>
 *     alloc base=0x.. size=<n> arg=<i> type=<t>
 *   alloc ptr=0x.. size=<n> type=<t> inside=<ur function id>
 */
#include <offtrace/offtrace.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>

#define MAX_DEPTH 128
#define MAX_LINES 256

static offtrace_context_id_t ctx;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t counts[OFFTRACE_TRACING_KIND_LAST][5];
static uint64_t unmatched_exit, foreign_correlation;
static char lines[MAX_LINES][160];
static unsigned nlines;
static int open_total;

/* This thread's open calls: (kind, correlation, UR function id). */
static __thread struct { uint32_t kind; uint64_t corr; uint32_t op; } stack[MAX_DEPTH];
static __thread int depth;

static void add_line(const char* s) {
    if (nlines < MAX_LINES) {
        strncpy(lines[nlines], s, sizeof lines[0] - 1);
        nlines++;
    }
}

/* The innermost open UR call on this thread, or NULL. */
static int innermost_ur(void) {
    for (int i = depth - 1; i >= 0; i--)
        if (stack[i].kind == OFFTRACE_TRACING_KIND_UR_API) return i;
    return -1;
}

static void on_record(offtrace_callback_tracing_record_t r, offtrace_user_data_t* user, void* data) {
    (void)user; (void)data;
    char buf[160];
    pthread_mutex_lock(&lock);
    if (r.kind < OFFTRACE_TRACING_KIND_LAST && r.phase < 5) counts[r.kind][r.phase]++;
    if (r.phase == OFFTRACE_CALLBACK_PHASE_ENTER) {
        if (depth < MAX_DEPTH) {
            stack[depth].kind = r.kind;
            stack[depth].corr = r.correlation_id.internal;
            stack[depth].op = r.operation;
        }
        depth++;
        open_total++;
    } else if (r.phase == OFFTRACE_CALLBACK_PHASE_EXIT) {
        if (depth == 0 || (depth <= MAX_DEPTH && (stack[depth - 1].kind != r.kind ||
                                                  stack[depth - 1].corr != r.correlation_id.internal)))
            unmatched_exit++;
        if (depth > 0) {
            depth--;
            open_total--;
        }
    } else {
        /* One-shot records inside a UR call carry its correlation id (device activity completed
         * later, phase COMPLETE, carries the id of the call that launched it instead). */
        int ur = innermost_ur();
        if (ur >= 0 && r.kind != OFFTRACE_TRACING_KIND_TASK_GRAPH && r.kind != OFFTRACE_TRACING_KIND_SYCL_QUEUE &&
            r.phase != OFFTRACE_CALLBACK_PHASE_COMPLETE && r.correlation_id.internal != stack[ur].corr)
            foreign_correlation++;
        if (r.kind == OFFTRACE_TRACING_KIND_KERNEL_DISPATCH && r.phase != OFFTRACE_CALLBACK_PHASE_COMPLETE) {
            const offtrace_callback_tracing_kernel_dispatch_data_t* p = r.payload;
            offtrace_kernel_allocation_properties_t props[8];
            uint32_t count = 8;
            offtrace_kernel_get_allocation_properties(&r, &count, props);
            snprintf(buf, sizeof buf, "dispatch name=%s corr=%" PRIu64 " ur_corr=%" PRIu64 " args=%u allocs=%u",
                     p->kernel_name ? p->kernel_name : "?", r.correlation_id.internal, ur >= 0 ? stack[ur].corr : 0,
                     p->kernel_arg_count, count);
            add_line(buf);
            for (uint32_t i = 0; i < count; i++) {
                snprintf(buf, sizeof buf, "  alloc base=0x%" PRIx64 " size=%" PRIu64 " arg=%d type=%u", props[i].base,
                         props[i].size, props[i].arg_index, (unsigned)props[i].type);
                add_line(buf);
            }
        } else if (r.kind == OFFTRACE_TRACING_KIND_MEMORY_ALLOC && r.operation == 0) {
            const offtrace_callback_tracing_memory_alloc_data_t* p = r.payload;
            snprintf(buf, sizeof buf, "alloc ptr=0x%" PRIx64 " size=%" PRIu64 " type=%u inside=%u", p->ptr, p->size,
                     (unsigned)p->type, ur >= 0 ? stack[ur].op : 0);
            add_line(buf);
        }
    }
    pthread_mutex_unlock(&lock);
}

static int tool_init(offtrace_client_finalize_t fini, void* tool_data) {
    (void)fini; (void)tool_data;
    if (offtrace_create_context(&ctx) != OFFTRACE_STATUS_SUCCESS) return 1;
    for (uint32_t k = OFFTRACE_TRACING_KIND_UR_API; k < OFFTRACE_TRACING_KIND_LAST; k++)
        if (offtrace_configure_callback_tracing_service(ctx, k, NULL, 0, on_record, NULL) != OFFTRACE_STATUS_SUCCESS)
            return 1;
    return offtrace_start_context(ctx) == OFFTRACE_STATUS_SUCCESS ? 0 : 1;
}

static void tool_fini(void* tool_data) {
    (void)tool_data;
    offtrace_stop_context(ctx);
    pthread_mutex_lock(&lock);
    for (uint32_t k = OFFTRACE_TRACING_KIND_UR_API; k < OFFTRACE_TRACING_KIND_LAST; k++) {
        const char* name = NULL;
        offtrace_query_callback_tracing_kind_name(k, &name, NULL);
        printf("kind %s enter=%" PRIu64 " exit=%" PRIu64 " instant=%" PRIu64 " load=%" PRIu64 " unload=%" PRIu64 "\n",
               name ? name : "?", counts[k][1], counts[k][2], counts[k][0], counts[k][3], counts[k][4]);
    }
    printf("unmatched_exit=%" PRIu64 " open_at_end=%d foreign_correlation=%" PRIu64 "\n", unmatched_exit, open_total,
           foreign_correlation);
    for (unsigned i = 0; i < nlines; i++) printf("%s\n", lines[i]);
    pthread_mutex_unlock(&lock);
    offtrace_destroy_context(ctx);
    fflush(stdout);
}

offtrace_tool_configure_result_t* offtrace_configure(uint32_t version, const char* runtime_version, uint32_t priority,
                                                     offtrace_client_id_t* client_id) {
    (void)version; (void)runtime_version; (void)priority;
    static offtrace_tool_configure_result_t result = {sizeof(offtrace_tool_configure_result_t), tool_init, tool_fini, NULL};
    client_id->name = "services_check";
    return &result;
}
