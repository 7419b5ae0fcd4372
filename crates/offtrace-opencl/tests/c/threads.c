/* threads: 4 threads, each with its own queue (two in-order, two out-of-order), enqueue kernels,
 * writes and reads at once on one context; half the commands ask for an event, half do not.
 * Prints what was enqueued. The layer must see every command exactly once. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { THREADS = 4, KERNELS = 50, N = 1024 };
static cl_context ctx;
static cl_device_id dev;
static cl_program prog;
static int failures;

static void* work(void* arg) {
    long t = (long)arg;
    cl_int err;
    cl_queue_properties props[] = {CL_QUEUE_PROPERTIES, (t & 1) ? CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE : 0, 0};
    cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, props, &err);
    cl_kernel k = clCreateKernel(prog, "inc", &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(int), NULL, &err);
    int host[N] = {0};
    cl_event w;
    clEnqueueWriteBuffer(q, b, CL_FALSE, 0, sizeof host, host, 0, NULL, &w);
    clSetKernelArg(k, 0, sizeof b, &b);
    size_t g = N;
    cl_event prev = w;
    for (int i = 0; i < KERNELS; i++) {
        cl_event e;
        /* chain the commands so that the out-of-order queues compute the same result */
        if (clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 1, &prev, &e) != CL_SUCCESS) failures++;
        clReleaseEvent(prev);
        prev = e;
    }
    if (clEnqueueReadBuffer(q, b, CL_TRUE, 0, sizeof host, host, 1, &prev, NULL) != CL_SUCCESS) failures++;
    clReleaseEvent(prev);
    if (host[7] != KERNELS) failures++;
    clReleaseMemObject(b);
    clReleaseKernel(k);
    clReleaseCommandQueue(q);
    return NULL;
}

int main(void) {
    const char* want = getenv("OFFTRACE_CL_PLATFORM");
    cl_platform_id ps[8], p = NULL;
    cl_uint np = 0;
    clGetPlatformIDs(8, ps, &np);
    for (cl_uint i = 0; i < np && !p; i++) {
        char name[256] = {0};
        clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
        if ((!want || strstr(name, want)) && clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL) == CL_SUCCESS) p = ps[i];
    }
    if (!p) return 2;
    cl_int err;
    ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    const char* src = "__kernel void inc(__global int* x) { x[get_global_id(0)] += 1; }";
    prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    if (clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS) return 3;
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, work, (void*)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    printf("threads: enqueued kernels=%d copies=%d, %s\n", THREADS * KERNELS, THREADS * 2, failures ? "WRONG" : "ok");
    clReleaseProgram(prog);
    clReleaseContext(ctx);
    return failures ? 3 : 0;
}
