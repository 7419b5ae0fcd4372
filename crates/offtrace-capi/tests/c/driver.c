/* A stand-in application: loads the tools named in argv[1] (":"-separated; or OFFTRACE_TOOLS
 * when absent), runs a mock UR workload (DRIVER_THREADS threads x DRIVER_ITERATIONS), and
 * finalises the tools. DRIVER_KEEP_GOING: run the workload even when a tool failed to load. */
#include <offtrace/offtrace.h>
#include <offtrace/offtrace_testing.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int iterations = 1;

static void* workload(void* arg) {
    (void)arg;
    const char* kname = "vector_add";
    for (int i = 0; i < iterations; i++) {
        uint64_t alloc[] = {0x10, 0x20, 0, 0, 4096, 0x7ffd0008};
        offtrace_testing_emit_ur_call(108, alloc, 6, 0);
        uint64_t create[] = {0xabc, (uint64_t)(uintptr_t)kname, 0x7ffd0010};
        offtrace_testing_emit_ur_call(48, create, 3, 0);
        uint64_t copy[] = {0x30, 1, 0x50000000, 0x7f0000001000, 4096, 0, 0, 0x7ffd0018};
        offtrace_testing_emit_ur_call(33, copy, 8, 0);
        uint64_t kargs[] = {0x50000000, 4096};
        offtrace_testing_emit_kernel_dispatch(0xdef, kname, kargs, 2, 0, 0);
        uint64_t finish[] = {0x30};
        offtrace_testing_emit_ur_call(97, finish, 1, 0);
    }
    return NULL;
}

int main(int argc, char** argv) {
    offtrace_testing_register_mock_ur_table();
    offtrace_status_t s = offtrace_load_tools(argc > 1 ? argv[1] : NULL);
    if (s != OFFTRACE_STATUS_SUCCESS) {
        printf("load failed: %s\n", offtrace_get_status_string(s));
        if (!getenv("DRIVER_KEEP_GOING")) return 3;
    }
    if (getenv("DRIVER_ITERATIONS")) iterations = atoi(getenv("DRIVER_ITERATIONS"));
    int threads = getenv("DRIVER_THREADS") ? atoi(getenv("DRIVER_THREADS")) : 1;
    offtrace_testing_emit_memory_alloc(0x50000000, 4096, OFFTRACE_MEMORY_TYPE_DEVICE);
    pthread_t t[64];
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, workload, NULL);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    offtrace_testing_emit_memory_free(0x50000000);
    offtrace_finalize_tools();
    return 0;
}
