/* The pairing guarantee through the C API: 8 threads emit UR calls while another thread starts
 * and stops the context 2000 times. Every delivered enter has exactly one exit, with the user
 * data the enter stored; after stop returns, no enter arrives. */
#include <offtrace/offtrace.h>
#include <offtrace/offtrace_testing.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

static atomic_ulong enters, exits, bad;
static atomic_int done;
static offtrace_context_id_t ctx;

static void on_call(offtrace_callback_tracing_record_t r, offtrace_user_data_t* user, void* data) {
    (void)data;
    if (r.phase == OFFTRACE_CALLBACK_PHASE_ENTER) {
        user->value = r.correlation_id.internal ^ r.thread_id;
        atomic_fetch_add(&enters, 1);
    } else {
        if (user->value != (r.correlation_id.internal ^ r.thread_id)) atomic_fetch_add(&bad, 1);
        atomic_fetch_add(&exits, 1);
    }
}

static void* emitter(void* arg) {
    (void)arg;
    uint64_t a[] = {1};
    while (!atomic_load(&done)) offtrace_testing_emit_ur_call(97, a, 1, 0);
    return NULL;
}

int main(void) {
    offtrace_testing_register_mock_ur_table();
    if (offtrace_create_context(&ctx) != OFFTRACE_STATUS_SUCCESS) return 1;
    offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_UR_API, NULL, 0, on_call, NULL);
    pthread_t t[8];
    for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, emitter, NULL);
    int late = 0;
    for (int i = 0; i < 2000; i++) {
        if (i % 2 == 0) {
            offtrace_start_context(ctx);
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        } else {
            offtrace_stop_context(ctx);
            unsigned long e = atomic_load(&enters);
            struct timespec ts = {0, 1000};
            nanosleep(&ts, NULL);
            if (atomic_load(&enters) != e) late++;
        }
    }
    atomic_store(&done, 1);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    offtrace_destroy_context(ctx);
    unsigned long e = atomic_load(&enters), x = atomic_load(&exits), b = atomic_load(&bad);
    printf("enters=%lu exits=%lu bad_user_data=%lu enters_after_stop=%d\n", e, x, b, late);
    return (e > 0 && e == x && b == 0 && late == 0) ? 0 : 1;
}
