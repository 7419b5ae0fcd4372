/* ooo_many_kernels: thousands of small kernels on one OUT-OF-ORDER queue, the OpenCL layer's
 * overhead benchmark for such queues (scripts/opencl-ooo-overhead.py; docs/overhead.md, "OpenCL
 * out-of-order queues"). many_kernels.c is the in-order benchmark.
 *
 *   cc -O2 examples/opencl/ooo_many_kernels.c -lOpenCL -o ooo_many_kernels
 *   ./ooo_many_kernels [--kernels N] [--items W] [--in-order] [--profile] [--events] [--platform SUBSTRING]
 *
 * Enqueues N kernels of W work items (default 64; each adds 1 to each element of a W-int buffer
 * with atomic_inc, as the kernels may run at once) on an out-of-order queue, then clFinish, and
 * prints the wall time per kernel ("kernels N: X ns/kernel"); checks the result. --in-order: the
 * same kernel on an in-order queue, for a comparison. --profile creates the queue with
 * CL_QUEUE_PROFILING_ENABLE; --events asks for each kernel's event and releases it right after
 * the enqueue (with --profile: what an event with profiling costs the runtime per command).
 */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char** argv) {
    int kernels = 20000, profile = 0, items = 64, events = 0, in_order = 0;
    const char* want = getenv("OFFTRACE_CL_PLATFORM");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--kernels") && i + 1 < argc) kernels = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--items") && i + 1 < argc) items = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--in-order")) in_order = 1;
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (!strcmp(argv[i], "--events")) events = 1;
        else if (!strcmp(argv[i], "--platform") && i + 1 < argc) want = argv[++i];
        else { fprintf(stderr, "ooo_many_kernels: unknown argument %s\n", argv[i]); return 2; }
    }
    cl_platform_id ps[16], p = NULL;
    cl_device_id d = NULL;
    cl_uint np = 0;
    clGetPlatformIDs(16, ps, &np);
    for (cl_uint i = 0; i < np && !p; i++) {
        char name[256] = {0};
        clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
        if ((!want || strstr(name, want)) && clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 1, &d, NULL) == CL_SUCCESS) p = ps[i];
    }
    if (!p) { fprintf(stderr, "ooo_many_kernels: no platform\n"); return 2; }
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
    cl_queue_properties props[] = {CL_QUEUE_PROPERTIES,
        (profile ? CL_QUEUE_PROFILING_ENABLE : 0) | (in_order ? 0 : CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE), 0};
    cl_command_queue q = clCreateCommandQueueWithProperties(ctx, d, props, &err);
    if (err != CL_SUCCESS) { fprintf(stderr, "ooo_many_kernels: queue: %d\n", err); return 3; }
    const char* src = "__kernel void inc(__global int* x) { atomic_inc(&x[get_global_id(0)]); }";
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 1, &d, "", NULL, NULL);
    cl_kernel k = clCreateKernel(prog, "inc", &err);
    if (items < 1) items = 1;
    int* zero = calloc((size_t)items, sizeof(int));
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, (size_t)items * sizeof(int), zero, &err);
    clSetKernelArg(k, 0, sizeof b, &b);
    size_t g = (size_t)items;
    /* warm up: the first launches compile and start the runtime's threads */
    for (int i = 0; i < 100; i++) clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    clFinish(q);
    double t0 = now_ns();
    for (int i = 0; i < kernels; i++) {
        cl_event ev = NULL;
        if (clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, events ? &ev : NULL) != CL_SUCCESS) return 3;
        if (ev) clReleaseEvent(ev);
    }
    clFinish(q);
    double t1 = now_ns();
    int out[1];
    clEnqueueReadBuffer(q, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
    if (out[0] != kernels + 100) { fprintf(stderr, "wrong result %d\n", out[0]); return 3; }
    free(zero);
    printf("kernels %d: %.1f ns/kernel\n", kernels, (t1 - t0) / kernels);
    clReleaseMemObject(b); clReleaseKernel(k); clReleaseProgram(prog); clReleaseCommandQueue(q); clReleaseContext(ctx);
    return 0;
}
