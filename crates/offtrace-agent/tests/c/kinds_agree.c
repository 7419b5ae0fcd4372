/* kinds_agree: an offtrace tool (written against offtrace.h only) that subscribes every kind
 * twice in one context, as callbacks and into a buffer, and checks at its finalize that both
 * saw the same records, kind by kind: every callback record except an ENTER (a pair's ENTER and
 * EXIT are one buffer record, phase NONE, at the exit) has exactly one buffer record with the
 * same kind, operation, correlation id, phase (EXIT -> NONE) and the same content, a digest of
 * the fields both carry (the callback payload's, the typed buffer record's), and the other way
 * round. Prints one line per kind and a summary:
 *   kinds_agree: kind=<k> callbacks=<n> buffered=<n>
 *   kinds_agree: total=<n> mismatches=<n> deliveries=<n> delivery_on_app_thread=<0|1> named_dispatches=<n> timed=<n>
 */
#include <offtrace/offtrace.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KINDS 32

typedef struct {
    uint64_t kind_op_phase; /* kind << 40 | phase << 32 | operation */
    uint64_t correlation;
    uint64_t digest;
} key_t_;

typedef struct {
    key_t_* v;
    size_t n, cap;
} keys_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static keys_t from_callbacks, from_buffer;
static uint64_t callbacks_by_kind[KINDS], buffered_by_kind[KINDS];
static uint64_t deliveries, named_dispatches, timed_activity;
static int delivery_on_app_thread;
static offtrace_context_id_t ctx;
static offtrace_buffer_id_t buffer;

static void push(keys_t* k, key_t_ e) {
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 4096;
        k->v = realloc(k->v, k->cap * sizeof *k->v);
        if (!k->v) abort();
    }
    k->v[k->n++] = e;
}

/* FNV-1a over 64-bit words and strings. */
static uint64_t mix(uint64_t h, uint64_t v) {
    for (int i = 0; i < 8; i++) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
    return h;
}
static uint64_t mix_str(uint64_t h, const char* s) {
    if (!s) return mix(h, 0);
    for (size_t i = 0; s[i] && i < 1023; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return mix(h, 1);
}
#define H0 0xcbf29ce484222325ull

static int is_api(uint32_t kind) {
    return kind == OFFTRACE_TRACING_KIND_UR_API || kind == OFFTRACE_TRACING_KIND_OPENCL_API ||
           kind == OFFTRACE_TRACING_KIND_CUDA_RUNTIME_API || kind == OFFTRACE_TRACING_KIND_CUDA_DRIVER_API;
}

/* The digest of what a callback payload of `kind` and its buffer record both carry. */
static uint64_t digest_callback(uint32_t kind, uint32_t phase, const void* p) {
    uint64_t h = H0;
    if (!p || kind == OFFTRACE_TRACING_KIND_XPTI) return h;
    switch (kind) {
    case OFFTRACE_TRACING_KIND_QUEUE: {
        const offtrace_callback_tracing_queue_data_t* q = p;
        h = mix(mix(mix(mix(h, q->queue), q->device), q->context), q->flags);
        break;
    }
    case OFFTRACE_TRACING_KIND_KERNEL_DISPATCH: {
        const offtrace_callback_tracing_kernel_dispatch_data_t* k = p;
        h = mix(mix(mix(mix(h, k->queue), k->kernel), k->device), k->work_dim);
        for (int i = 0; i < 3; i++) h = mix(mix(h, k->global_size[i]), k->local_size[i]);
        uint32_t n = k->kernel_arg_count < OFFTRACE_MAX_KERNEL_ARGS ? k->kernel_arg_count : OFFTRACE_MAX_KERNEL_ARGS;
        for (uint32_t i = 0; i < n; i++) h = mix(h, k->kernel_args[i]);
        h = mix_str(h, k->kernel_name);
        if (phase == OFFTRACE_CALLBACK_PHASE_COMPLETE) h = mix(mix(h, k->device_start), k->device_end);
        break;
    }
    case OFFTRACE_TRACING_KIND_MEMORY_COPY: {
        const offtrace_callback_tracing_memory_copy_data_t* c = p;
        h = mix(mix(mix(mix(mix(h, c->queue), c->device), c->dst), c->src), c->size);
        h = mix(mix(mix(h, c->direction), c->src_type), c->dst_type);
        if (phase == OFFTRACE_CALLBACK_PHASE_COMPLETE) h = mix(mix(h, c->device_start), c->device_end);
        break;
    }
    case OFFTRACE_TRACING_KIND_MEMORY_FILL: {
        const offtrace_callback_tracing_memory_fill_data_t* f = p;
        h = mix(mix(mix(mix(mix(mix(h, f->queue), f->device), f->dst), f->pattern), f->pattern_size), f->size);
        if (phase == OFFTRACE_CALLBACK_PHASE_COMPLETE) h = mix(mix(h, f->device_start), f->device_end);
        break;
    }
    case OFFTRACE_TRACING_KIND_MEMORY_ALLOC: {
        const offtrace_callback_tracing_memory_alloc_data_t* a = p;
        h = mix(mix(mix(mix(h, a->ptr), a->size), a->device), a->type);
        break;
    }
    case OFFTRACE_TRACING_KIND_SYNC: {
        const offtrace_callback_tracing_sync_data_t* s = p;
        h = mix(mix(mix(mix(h, s->object), s->queue), s->device), s->event_count);
        if (phase == OFFTRACE_CALLBACK_PHASE_COMPLETE) h = mix(mix(h, s->device_start), s->device_end);
        break;
    }
    case OFFTRACE_TRACING_KIND_TASK_GRAPH: {
        const offtrace_callback_tracing_task_graph_data_t* g = p;
        h = mix(mix(mix(mix(mix(h, g->node), g->source), g->target), g->event), g->queue);
        h = mix_str(h, g->name);
        break;
    }
    case OFFTRACE_TRACING_KIND_CODE_OBJECT: {
        const offtrace_callback_tracing_code_object_data_t* c = p;
        h = mix_str(mix(mix(mix(h, c->handle), c->program), c->binary_size), c->name);
        break;
    }
    case OFFTRACE_TRACING_KIND_MARKER: {
        const offtrace_callback_tracing_marker_data_t* m = p;
        h = mix_str(mix(h, m->range_id), m->message);
        break;
    }
    case OFFTRACE_TRACING_KIND_DEVICE: {
        const offtrace_callback_tracing_device_data_t* d = p;
        h = mix_str(mix(mix(mix(h, d->handle), d->parent), d->device_type), d->name);
        break;
    }
    case OFFTRACE_TRACING_KIND_COUNTER: {
        const offtrace_callback_tracing_counter_data_t* c = p;
        h = mix_str(mix_str(mix(mix(mix(h, c->counter), c->device), c->value), c->name), c->unit);
        break;
    }
    default:
        if (is_api(kind)) {
            const offtrace_callback_tracing_api_data_t* a = p;
            h = mix(mix(h, a->function_id), a->arg_count);
            for (uint32_t i = 0; i < a->arg_count && i < OFFTRACE_MAX_API_ARGS; i++) h = mix(h, a->args[i]);
            h = mix(h, (uint32_t)a->result);
        }
    }
    return h;
}

static const char* str_at(const void* r, uint32_t offset) {
    return offset ? (const char*)OFFTRACE_BUFFER_RECORD_AT(r, offset) : NULL;
}

/* The same digest from a typed buffer record (the header alone: no payload). */
static uint64_t digest_record(const offtrace_buffer_tracing_record_t* r) {
    uint64_t h = H0;
    uint32_t kind = r->kind, phase = r->phase;
    if (r->size <= sizeof *r || kind == OFFTRACE_TRACING_KIND_XPTI) return h;
    switch (kind) {
    case OFFTRACE_TRACING_KIND_QUEUE: {
        const offtrace_buffer_tracing_queue_record_t* q = (const void*)r;
        h = mix(mix(mix(mix(h, q->queue), q->device), q->context), q->flags);
        break;
    }
    case OFFTRACE_TRACING_KIND_KERNEL_DISPATCH: {
        const offtrace_buffer_tracing_kernel_dispatch_record_t* k = (const void*)r;
        h = mix(mix(mix(mix(h, k->queue), k->kernel), k->device), k->work_dim);
        for (int i = 0; i < 3; i++) h = mix(mix(h, k->global_size[i]), k->local_size[i]);
        const uint64_t* args = OFFTRACE_BUFFER_RECORD_AT(k, k->args_offset);
        for (uint32_t i = 0; i < k->kernel_arg_count; i++) h = mix(h, args[i]);
        const char* name = str_at(k, k->name_offset);
        h = mix_str(h, name);
        if (name) named_dispatches++;
        if (phase == OFFTRACE_CALLBACK_PHASE_COMPLETE) {
            h = mix(mix(h, k->device_start), k->device_end);
            if (k->device_end >= k->device_start && k->device_start == r->start_timestamp) timed_activity++;
        }
        break;
    }
    case OFFTRACE_TRACING_KIND_MEMORY_COPY: {
        const offtrace_buffer_tracing_memory_copy_record_t* c = (const void*)r;
        h = mix(mix(mix(mix(mix(h, c->queue), c->device), c->dst), c->src), c->bytes);
        h = mix(mix(mix(h, c->direction), c->src_type), c->dst_type);
        if (phase == OFFTRACE_CALLBACK_PHASE_COMPLETE) {
            h = mix(mix(h, c->device_start), c->device_end);
            if (c->device_end >= c->device_start && c->device_start == r->start_timestamp) timed_activity++;
        }
        break;
    }
    case OFFTRACE_TRACING_KIND_MEMORY_FILL: {
        const offtrace_buffer_tracing_memory_fill_record_t* f = (const void*)r;
        h = mix(mix(mix(mix(mix(mix(h, f->queue), f->device), f->dst), f->pattern), f->pattern_size), f->bytes);
        if (phase == OFFTRACE_CALLBACK_PHASE_COMPLETE) h = mix(mix(h, f->device_start), f->device_end);
        break;
    }
    case OFFTRACE_TRACING_KIND_MEMORY_ALLOC: {
        const offtrace_buffer_tracing_memory_alloc_record_t* a = (const void*)r;
        h = mix(mix(mix(mix(h, a->ptr), a->bytes), a->device), a->memory_type);
        break;
    }
    case OFFTRACE_TRACING_KIND_SYNC: {
        const offtrace_buffer_tracing_sync_record_t* s = (const void*)r;
        h = mix(mix(mix(mix(h, s->object), s->queue), s->device), s->event_count);
        if (phase == OFFTRACE_CALLBACK_PHASE_COMPLETE) h = mix(mix(h, s->device_start), s->device_end);
        break;
    }
    case OFFTRACE_TRACING_KIND_TASK_GRAPH: {
        const offtrace_buffer_tracing_task_graph_record_t* g = (const void*)r;
        h = mix(mix(mix(mix(mix(h, g->node), g->source), g->target), g->event), g->queue);
        h = mix_str(h, str_at(g, g->name_offset));
        break;
    }
    case OFFTRACE_TRACING_KIND_CODE_OBJECT: {
        const offtrace_buffer_tracing_code_object_record_t* c = (const void*)r;
        h = mix_str(mix(mix(mix(h, c->handle), c->program), c->binary_size), str_at(c, c->name_offset));
        break;
    }
    case OFFTRACE_TRACING_KIND_MARKER: {
        const offtrace_buffer_tracing_marker_record_t* m = (const void*)r;
        h = mix_str(mix(h, m->range_id), str_at(m, m->message_offset));
        break;
    }
    case OFFTRACE_TRACING_KIND_DEVICE: {
        const offtrace_buffer_tracing_device_record_t* d = (const void*)r;
        h = mix_str(mix(mix(mix(h, d->handle), d->parent), d->device_type), str_at(d, d->name_offset));
        break;
    }
    case OFFTRACE_TRACING_KIND_COUNTER: {
        const offtrace_buffer_tracing_counter_record_t* c = (const void*)r;
        h = mix_str(mix_str(mix(mix(mix(h, c->counter), c->device), c->value), str_at(c, c->name_offset)),
                    str_at(c, c->unit_offset));
        break;
    }
    default:
        if (is_api(kind)) {
            const offtrace_buffer_tracing_api_call_record_t* a = (const void*)r;
            const uint64_t* args = OFFTRACE_BUFFER_RECORD_AT(a, a->args_offset);
            h = mix(mix(h, a->function_id), a->arg_count);
            for (uint32_t i = 0; i < a->arg_count; i++) h = mix(h, args[i]);
            h = mix(h, (uint32_t)a->result);
        }
    }
    return h;
}

static uint64_t kop(uint32_t kind, uint32_t phase, uint32_t op) {
    return (uint64_t)kind << 40 | (uint64_t)phase << 32 | op;
}

static pthread_t app_thread_seen[64];
static int app_threads;

static void on_callback(offtrace_callback_tracing_record_t r, offtrace_user_data_t* user, void* data) {
    (void)user; (void)data;
    pthread_mutex_lock(&lock);
    int known = 0;
    for (int i = 0; i < app_threads; i++) known |= pthread_equal(app_thread_seen[i], pthread_self());
    if (!known && app_threads < 64) app_thread_seen[app_threads++] = pthread_self();
    if (r.kind < KINDS) callbacks_by_kind[r.kind]++;
    if (r.phase != OFFTRACE_CALLBACK_PHASE_ENTER) {
        uint32_t phase = r.phase == OFFTRACE_CALLBACK_PHASE_EXIT ? OFFTRACE_CALLBACK_PHASE_NONE : r.phase;
        /* A pair's buffer record carries the exit's payload. */
        key_t_ k = {kop(r.kind, phase, r.operation), r.correlation_id.internal, digest_callback(r.kind, r.phase, r.payload)};
        push(&from_callbacks, k);
    }
    pthread_mutex_unlock(&lock);
}

static void on_records(offtrace_context_id_t c, offtrace_buffer_id_t b,
                       const offtrace_buffer_tracing_record_t* const* records, size_t count, void* data,
                       uint64_t drop_count) {
    (void)c; (void)b; (void)data; (void)drop_count;
    pthread_mutex_lock(&lock);
    deliveries++;
    for (int i = 0; i < app_threads; i++) delivery_on_app_thread |= pthread_equal(app_thread_seen[i], pthread_self());
    for (size_t i = 0; i < count; i++) {
        const offtrace_buffer_tracing_record_t* r = records[i];
        if (r->kind < KINDS) buffered_by_kind[r->kind]++;
        key_t_ k = {kop(r->kind, r->phase, r->operation), r->correlation_id.internal, digest_record(r)};
        push(&from_buffer, k);
    }
    pthread_mutex_unlock(&lock);
}

static int cmp_key(const void* a, const void* b) {
    const key_t_ *x = a, *y = b;
    if (x->kind_op_phase != y->kind_op_phase) return x->kind_op_phase < y->kind_op_phase ? -1 : 1;
    if (x->correlation != y->correlation) return x->correlation < y->correlation ? -1 : 1;
    if (x->digest != y->digest) return x->digest < y->digest ? -1 : 1;
    return 0;
}

static int subscribe_kind(offtrace_tracing_kind_t kind, void* data) {
    (void)data;
    offtrace_configure_callback_tracing_service(ctx, kind, NULL, 0, on_callback, NULL);
    offtrace_configure_buffer_tracing_service(ctx, kind, NULL, 0, buffer);
    return 0;
}

static int tool_init(offtrace_client_finalize_t fini, void* tool_data) {
    (void)fini; (void)tool_data;
    if (offtrace_create_context(&ctx) != OFFTRACE_STATUS_SUCCESS) return 1;
    if (offtrace_create_buffer(ctx, 1 << 20, 1 << 19, OFFTRACE_BUFFER_POLICY_LOSSLESS, on_records, NULL, &buffer) !=
        OFFTRACE_STATUS_SUCCESS)
        return 1;
    offtrace_iterate_callback_tracing_kinds(subscribe_kind, NULL);
    return offtrace_start_context(ctx) == OFFTRACE_STATUS_SUCCESS ? 0 : 1;
}

static void tool_fini(void* tool_data) {
    (void)tool_data;
    /* Stopped first: a call's exit reaches a context whole (callback and record) or not at all. */
    offtrace_stop_context(ctx);
    offtrace_flush_buffer(buffer);
    pthread_mutex_lock(&lock);
    qsort(from_callbacks.v, from_callbacks.n, sizeof(key_t_), cmp_key);
    qsort(from_buffer.v, from_buffer.n, sizeof(key_t_), cmp_key);
    size_t i = 0, j = 0, mismatches = 0;
    while (i < from_callbacks.n || j < from_buffer.n) {
        int c = i == from_callbacks.n ? 1 : j == from_buffer.n ? -1 : cmp_key(&from_callbacks.v[i], &from_buffer.v[j]);
        if (c == 0) {
            i++, j++;
            continue;
        }
        const key_t_* k = c < 0 ? &from_callbacks.v[i++] : &from_buffer.v[j++];
        if (mismatches++ < 5)
            printf("kinds_agree: only in %s: kind=%" PRIu64 " phase=%" PRIu64 " op=%" PRIu64 " corr=%" PRIu64 "\n",
                   c < 0 ? "callbacks" : "buffer", k->kind_op_phase >> 40, (k->kind_op_phase >> 32) & 0xff,
                   k->kind_op_phase & 0xffffffffu, k->correlation);
    }
    for (int k = 0; k < KINDS; k++)
        if (callbacks_by_kind[k] || buffered_by_kind[k])
            printf("kinds_agree: kind=%d callbacks=%" PRIu64 " buffered=%" PRIu64 "\n", k, callbacks_by_kind[k],
                   buffered_by_kind[k]);
    printf("kinds_agree: total=%zu mismatches=%zu deliveries=%" PRIu64 " delivery_on_app_thread=%d"
           " named_dispatches=%" PRIu64 " timed=%" PRIu64 "\n",
           from_buffer.n, mismatches, deliveries, delivery_on_app_thread, named_dispatches, timed_activity);
    pthread_mutex_unlock(&lock);
    offtrace_destroy_context(ctx);
    fflush(stdout);
}

offtrace_tool_configure_result_t* offtrace_configure(uint32_t version, const char* runtime_version, uint32_t priority,
                                                     offtrace_client_id_t* client_id) {
    (void)runtime_version; (void)priority;
    if (version < OFFTRACE_VERSION_ENCODE(0, 2, 0)) return NULL; /* typed buffer records */
    static offtrace_tool_configure_result_t result = {sizeof(offtrace_tool_configure_result_t), tool_init, tool_fini,
                                                      NULL};
    client_id->name = "kinds_agree";
    return &result;
}
