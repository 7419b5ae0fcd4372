/* Process life of an OpenCL program: children, a kill, an exit() from a worker thread.
 *
 *   process_life fork N      uses OpenCL, then runs N children (fork + exec of itself as
 *                            `child I`), each using OpenCL; waits for them
 *   process_life child I     4 kernels and a read on its own queue
 *   process_life spin        enqueues kernels forever (until killed), printing `spinning`
 *                            once the first 100 completed
 *   process_life exit-thread 3 threads enqueue kernels on their own queues; after 200 ms the
 *                            third calls exit(0) while the others still enqueue
 *
 * Every mode prints `done MODE kernels K` (K = kernels it enqueued) before it ends normally.
 * The platform: the first whose name contains $OFFTRACE_CL_PLATFORM (any when unset).
 *
 *   gcc -O1 -o process_life process_life.c -lOpenCL -lpthread
 */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N 4096
#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cl_int e_ = (x);                                                                           \
        if (e_ != CL_SUCCESS) {                                                                    \
            fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, e_);                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static cl_device_id dev;
static cl_context ctx;
static cl_program prog;
static atomic_long enqueued;

static void open_device(void) {
    const char *want = getenv("OFFTRACE_CL_PLATFORM");
    cl_platform_id ps[8];
    cl_uint np = 0;
    CHECK(clGetPlatformIDs(8, ps, &np));
    for (cl_uint i = 0; i < np; i++) {
        char name[256] = {0};
        CHECK(clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name - 1, name, NULL));
        if ((!want || strstr(name, want)) && clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL) == CL_SUCCESS)
            break;
        dev = NULL;
    }
    if (!dev) {
        fprintf(stderr, "no platform *%s*\n", want ? want : "");
        exit(2);
    }
    cl_int err;
    ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    CHECK(err);
    const char *src = "__kernel void bump(__global int *x) { x[get_global_id(0)] += 1; }";
    prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    CHECK(err);
    CHECK(clBuildProgram(prog, 1, &dev, "", NULL, NULL));
}

struct worker {
    cl_command_queue q;
    cl_kernel k;
    cl_mem b;
};

static void worker_init(struct worker *w) {
    cl_int err;
    w->q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
    CHECK(err);
    w->k = clCreateKernel(prog, "bump", &err);
    CHECK(err);
    w->b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(int), NULL, &err);
    CHECK(err);
    int zero = 0;
    CHECK(clEnqueueFillBuffer(w->q, w->b, &zero, sizeof zero, 0, N * sizeof(int), 0, NULL, NULL));
    CHECK(clSetKernelArg(w->k, 0, sizeof(cl_mem), &w->b));
}

static atomic_int exiting;

static void kernel(struct worker *w) {
    size_t g = N;
    cl_int e = clEnqueueNDRangeKernel(w->q, w->k, 1, NULL, &g, NULL, 0, NULL, NULL);
    if (e != CL_SUCCESS && atomic_load(&exiting)) {
        /* The process is exiting under this thread: the runtime may be torn down already.
         * Calling exit() a second time would be undefined: wait for the first one. */
        fprintf(stderr, "enqueue during exit: %d\n", e);
        for (;;)
            pause();
    }
    CHECK(e);
    atomic_fetch_add(&enqueued, 1);
}

static int read_first(struct worker *w) {
    int v = -1;
    CHECK(clEnqueueReadBuffer(w->q, w->b, CL_TRUE, 0, sizeof v, &v, 0, NULL, NULL));
    return v;
}

static void *exit_worker(void *arg) {
    long i = (long)arg;
    struct worker w;
    worker_init(&w);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        kernel(&w);
        if (atomic_load(&enqueued) % 64 == 0)
            CHECK(clFlush(w.q));
        clock_gettime(CLOCK_MONOTONIC, &t);
        long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (i == 2 && ms >= 200) {
            printf("done exit-thread kernels %ld\n", atomic_load(&enqueued));
            fflush(stdout);
            atomic_store(&exiting, 1);
            exit(0); /* from this thread, while the other two still enqueue */
        }
        if (ms % 20 == 0)
            read_first(&w); /* waits now and then, as a program does */
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    open_device();
    if (!strcmp(mode, "fork")) {
        int n = argc > 2 ? atoi(argv[2]) : 2;
        struct worker w;
        worker_init(&w);
        kernel(&w);
        int v = read_first(&w);
        for (int i = 0; i < n; i++) {
            pid_t pid = fork();
            if (pid == 0) {
                char arg[16];
                snprintf(arg, sizeof arg, "%d", i);
                execl("/proc/self/exe", argv[0], "child", arg, (char *)NULL);
                _exit(127);
            }
            int st = 0;
            waitpid(pid, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                fprintf(stderr, "child %d: status %d\n", i, st);
                return 1;
            }
        }
        kernel(&w);
        v += read_first(&w) - v;
        printf("done fork kernels %ld (value %d)\n", atomic_load(&enqueued), v);
        return v == 2 ? 0 : 1;
    }
    if (!strcmp(mode, "child")) {
        struct worker w;
        worker_init(&w);
        for (int i = 0; i < 4; i++)
            kernel(&w);
        int v = read_first(&w);
        printf("done child %s kernels %ld (value %d, pid %d)\n", argc > 2 ? argv[2] : "?",
               atomic_load(&enqueued), v, (int)getpid());
        return v == 4 ? 0 : 1;
    }
    if (!strcmp(mode, "spin")) {
        struct worker w;
        worker_init(&w);
        for (long i = 0;; i++) {
            kernel(&w);
            if (i % 100 == 99)
                read_first(&w);
            if (i == 99) {
                printf("spinning\n");
                fflush(stdout);
            }
        }
    }
    if (!strcmp(mode, "exit-thread")) {
        pthread_t t[3];
        for (long i = 0; i < 3; i++)
            pthread_create(&t[i], NULL, exit_worker, (void *)i);
        for (int i = 0; i < 3; i++)
            pthread_join(t[i], NULL);
        return 3; /* not reached: the third thread exits the process */
    }
    fprintf(stderr, "usage: process_life fork N | child I | spin | exit-thread\n");
    return 2;
}
