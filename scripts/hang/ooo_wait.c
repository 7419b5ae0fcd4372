/* A plain OpenCL program (no SYCL, no offtrace) that makes the waits of the hang of
 * docs/history/hang-2026-11-26-query-metrics.md on Intel's OpenCL CPU runtime: THREADS host
 * threads, each with an in-order queue and an out-of-order queue of its own and one out-of-order
 * queue shared by all, each iteration a chain in-order kernel -> own out-of-order copy -> shared
 * kernel -> barrier on its out-of-order queue -> copy, then clWaitForEvents on the last command and
 * clFinish of the in-order queue (the shape of examples/sycl/threads_queues.py's iteration).
 *
 * Options that stand for what a tracer does to the program, none by default:
 *   -p        CL_QUEUE_PROFILING_ENABLE on every queue
 *   -c USEC   a CL_COMPLETE callback on every out-of-order command that reads the command's
 *             profiling start and end and then spins USEC microseconds (a tracer's completion
 *             work on the runtime's thread)
 *
 * usage: ooo_wait [-p] [-c USEC] [THREADS] [ITERATIONS]      prints "ooo_wait: ok" at the end
 * build: cc -O2 -pthread -o ooo_wait scripts/hang/ooo_wait.c -lOpenCL
 * run on Intel's runtime: LD_LIBRARY_PATH=.venv/lib OCL_ICD_FILENAMES=.venv/lib/libintelocl.so
 * (scripts/stress-hang.sh -c ooo,ooo-cb0,ooo-cb200 loops it with a time limit). */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N 4096

static const char *SRC =
    "__kernel void scale_add(__global float *y, __global const float *x, float a) {\n"
    "  size_t i = get_global_id(0); y[i] = a * x[i] + y[i]; }\n"
    "__kernel void square(__global float *y) { size_t i = get_global_id(0); y[i] = y[i] * y[i]; }\n";

static cl_context ctx;
static cl_device_id dev;
static cl_program prog;
static cl_command_queue shared_q;
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t start;
static int iterations = 10, profiling = 0, callback_usec = -1;

#define CHECK(x)                                                                   \
  do {                                                                             \
    cl_int e_ = (x);                                                               \
    if (e_ != CL_SUCCESS) {                                                        \
      fprintf(stderr, "ooo_wait: %s = %d (line %d)\n", #x, e_, __LINE__);          \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void CL_CALLBACK on_complete(cl_event e, cl_int status, void *user) {
  (void)user;
  cl_ulong s = 0, t = 0;
  if (status == CL_COMPLETE && profiling) {
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof s, &s, NULL);
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL);
  }
  double until = now_us() + callback_usec;
  while (now_us() < until) {
  }
}

static void watch(cl_event e) {
  if (callback_usec >= 0) CHECK(clSetEventCallback(e, CL_COMPLETE, on_complete, NULL));
}

static cl_command_queue queue(int out_of_order) {
  cl_queue_properties p[] = {CL_QUEUE_PROPERTIES,
                             (out_of_order ? CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE : 0) |
                                 (profiling ? CL_QUEUE_PROFILING_ENABLE : 0),
                             0};
  cl_int err;
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, p, &err);
  CHECK(err);
  return q;
}

static void *worker(void *arg) {
  long index = (long)arg;
  cl_int err;
  cl_command_queue q_in = queue(0), q_ooo = queue(1);
  cl_kernel k1 = clCreateKernel(prog, "scale_add", &err);
  CHECK(err);
  cl_kernel k2 = clCreateKernel(prog, "square", &err);
  CHECK(err);
  cl_mem x = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &err);
  CHECK(err);
  cl_mem y = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &err);
  CHECK(err);
  cl_mem ys = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * 4, NULL, &err);
  CHECK(err);
  float *host = malloc(N * 4), *out = malloc(N * 4), a = 2.0f, zero = 0.0f;
  for (int i = 0; i < N; i++) host[i] = (float)(index + 1);
  size_t global = N;
  CHECK(clSetKernelArg(k1, 0, sizeof y, &y));
  CHECK(clSetKernelArg(k1, 1, sizeof x, &x));
  CHECK(clSetKernelArg(k1, 2, sizeof a, &a));
  CHECK(clSetKernelArg(k2, 0, sizeof ys, &ys));
  pthread_barrier_wait(&start);
  for (int it = 0; it < iterations; it++) {
    cl_event fill, h2d, k1e, d2d, k2e, bar, d2h;
    CHECK(clEnqueueFillBuffer(q_in, y, &zero, 4, 0, N * 4, 0, NULL, &fill));
    CHECK(clWaitForEvents(1, &fill));
    CHECK(clEnqueueWriteBuffer(q_in, x, CL_FALSE, 0, N * 4, host, 0, NULL, &h2d));
    CHECK(clEnqueueNDRangeKernel(q_in, k1, 1, NULL, &global, NULL, 1, &h2d, &k1e));
    CHECK(clEnqueueCopyBuffer(q_ooo, y, ys, 0, 0, N * 4, 1, &k1e, &d2d));
    watch(d2d);
    pthread_mutex_lock(&shared_lock); /* one kernel object's arguments at a time */
    CHECK(clEnqueueNDRangeKernel(shared_q, k2, 1, NULL, &global, NULL, 1, &d2d, &k2e));
    pthread_mutex_unlock(&shared_lock);
    watch(k2e);
    CHECK(clEnqueueBarrierWithWaitList(q_ooo, 1, &k2e, &bar));
    watch(bar);
    CHECK(clEnqueueReadBuffer(q_ooo, ys, CL_FALSE, 0, N * 4, out, 1, &bar, &d2h));
    watch(d2h);
    CHECK(clWaitForEvents(1, &d2h));
    CHECK(clFinish(q_in));
    cl_event all[] = {fill, h2d, k1e, d2d, k2e, bar, d2h};
    for (int i = 0; i < 7; i++) clReleaseEvent(all[i]);
  }
  float expected = (2.0f * (index + 1)) * (2.0f * (index + 1));
  int ok = out[0] == expected && out[N - 1] == expected;
  clReleaseMemObject(x);
  clReleaseMemObject(y);
  clReleaseMemObject(ys);
  clReleaseKernel(k1);
  clReleaseKernel(k2);
  clReleaseCommandQueue(q_in);
  clReleaseCommandQueue(q_ooo);
  free(host);
  free(out);
  return (void *)(long)ok;
}

int main(int argc, char **argv) {
  int opt;
  while ((opt = getopt(argc, argv, "pc:")) != -1) {
    if (opt == 'p') profiling = 1;
    else if (opt == 'c') callback_usec = atoi(optarg);
    else {
      fprintf(stderr, "usage: ooo_wait [-p] [-c USEC] [THREADS] [ITERATIONS]\n");
      return 2;
    }
  }
  int threads = optind < argc ? atoi(argv[optind]) : 4;
  if (optind + 1 < argc) iterations = atoi(argv[optind + 1]);
  cl_platform_id platforms[8];
  cl_uint np = 0;
  CHECK(clGetPlatformIDs(8, platforms, &np));
  cl_uint nd = 0;
  for (cl_uint i = 0; i < np && nd == 0; i++) {
    char name[256] = "";
    clGetPlatformInfo(platforms[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
    if (strstr(name, "Intel") && clGetDeviceIDs(platforms[i], CL_DEVICE_TYPE_CPU, 1, &dev, &nd) != CL_SUCCESS)
      nd = 0;
  }
  if (nd == 0) {
    fprintf(stderr, "ooo_wait: no Intel CPU device (OCL_ICD_FILENAMES=<venv>/lib/libintelocl.so)\n");
    return 2;
  }
  cl_int err;
  ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CHECK(err);
  prog = clCreateProgramWithSource(ctx, 1, &SRC, NULL, &err);
  CHECK(err);
  CHECK(clBuildProgram(prog, 1, &dev, "", NULL, NULL));
  shared_q = queue(1);
  pthread_barrier_init(&start, NULL, threads);
  pthread_t *t = calloc(threads, sizeof *t);
  for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)i);
  int ok = 1;
  for (int i = 0; i < threads; i++) {
    void *r;
    pthread_join(t[i], &r);
    ok &= r != NULL;
  }
  CHECK(clFinish(shared_q));
  printf("ooo_wait: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
