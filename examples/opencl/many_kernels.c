/* many_kernels: thousands of small kernels, and a cheap call in a loop: the OpenCL layer's
 * overhead benchmark, on an in-order or an out-of-order queue (scripts/opencl-overhead.py runs it
 * with and without the layer; docs/overhead.md, "OpenCL layer" and "OpenCL out-of-order queues").
 *
 *   cc -O2 examples/opencl/many_kernels.c -lOpenCL -o many_kernels
 *   ./many_kernels [--kernels N] [--items W] [--calls M] [--out-of-order] [--atomic] [--profile]
 *                  [--events] [--query [B]] [--batched [B]] [--platform SUBSTRING]
 *
 * Prints two lines: the wall time per kernel of enqueueing N small kernels (W work items, default 64) on
 * one queue plus the final clFinish, and the time per call of M (default 1,000,000; 0: none)
 * clGetDeviceInfo(CL_DEVICE_TYPE) calls. The queue is in-order, and each kernel adds 1 to each
 * element of a W-int buffer. --out-of-order creates the queue with
 * CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, and the kernel adds with atomic_inc (the kernels may
 * run at once); --atomic uses that kernel on an in-order queue too, for a comparison of the two
 * queues with the same kernel. --profile creates the queue with
 * CL_QUEUE_PROFILING_ENABLE (the runtime's own profiling, for comparison); --events asks for
 * each kernel's event and releases it right after the enqueue (with --profile: what an event
 * with profiling costs the runtime per command, the floor of any tracer that reads device times
 * from events). --query [B] (implies --profile) keeps each kernel's event and, once B more
 * (default 1,024) have been enqueued, waits for the previous batch's last event (on an in-order
 * queue the earlier ones completed before it; on an out-of-order queue it waits for all of the
 * batch's events), reads CL_PROFILING_COMMAND_START and _END of every
 * event of that batch and releases them; the last batches after clFinish. That is the least any
 * tracer that reports a device time for every kernel makes the runtime do: an event per command
 * on a profiling queue, two profiling queries after completion, the release. The batch in flight
 * keeps the queue fed while the earlier one is read. It then prints a third line, the sum of the
 * device times (so that the queries cannot be left out). --batched [B] waits as --query does
 * (a marker's event after every B kernels, the previous marker waited for and released) but asks
 * for no kernel's event: the same depth of the queue's backlog as --query without its events,
 * the baseline against which --query's time is compared (a program that enqueues everything
 * before one clFinish keeps a backlog of N commands, which costs the runtimes more than the
 * waits do).
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

/* --query: reads the device times of events[0..n) and releases them; returns their sum in ns.
 * `all`: wait for every event (an out-of-order queue), not only the last. */
static unsigned long long harvest(cl_event* events, int n, int all) {
    unsigned long long sum = 0;
    if (n == 0) return 0;
    if (all) clWaitForEvents((cl_uint)n, events);
    else clWaitForEvents(1, &events[n - 1]);
    for (int i = 0; i < n; i++) {
        cl_ulong start = 0, end = 0;
        clGetEventProfilingInfo(events[i], CL_PROFILING_COMMAND_START, sizeof start, &start, NULL);
        clGetEventProfilingInfo(events[i], CL_PROFILING_COMMAND_END, sizeof end, &end, NULL);
        sum += end - start;
        clReleaseEvent(events[i]);
    }
    return sum;
}

int main(int argc, char** argv) {
    int kernels = 20000, calls = 1000000, profile = 0, items = 64, events = 0, batch = 0, marker_every = 0;
    int out_of_order = 0, atomic = 0;
    const char* want = getenv("OFFTRACE_CL_PLATFORM");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--kernels") && i + 1 < argc) kernels = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--items") && i + 1 < argc) items = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out-of-order")) out_of_order = atomic = 1;
        else if (!strcmp(argv[i], "--atomic")) atomic = 1;
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (!strcmp(argv[i], "--events")) events = 1;
        else if (!strcmp(argv[i], "--query")) {
            profile = 1;
            batch = i + 1 < argc && argv[i + 1][0] != '-' ? atoi(argv[++i]) : 1024;
            if (batch < 1) batch = 1;
        }
        else if (!strcmp(argv[i], "--batched")) {
            marker_every = i + 1 < argc && argv[i + 1][0] != '-' ? atoi(argv[++i]) : 1024;
            if (marker_every < 1) marker_every = 1;
        }
        else if (!strcmp(argv[i], "--platform") && i + 1 < argc) want = argv[++i];
        else { fprintf(stderr, "many_kernels: unknown argument %s\n", argv[i]); return 2; }
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
    if (!p) { fprintf(stderr, "many_kernels: no platform\n"); return 2; }
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
    cl_queue_properties props[] = {CL_QUEUE_PROPERTIES,
        (profile ? CL_QUEUE_PROFILING_ENABLE : 0) | (out_of_order ? CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE : 0), 0};
    cl_command_queue q = clCreateCommandQueueWithProperties(ctx, d, props, &err);
    if (err != CL_SUCCESS) { fprintf(stderr, "many_kernels: queue: %d\n", err); return 3; }
    const char* src = atomic ? "__kernel void inc(__global int* x) { atomic_inc(&x[get_global_id(0)]); }"
                             : "__kernel void inc(__global int* x) { x[get_global_id(0)] += 1; }";
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
    /* --query: two batches of events, the one being filled and the one before it */
    cl_event* held = batch ? malloc(2 * (size_t)batch * sizeof(cl_event)) : NULL;
    cl_event *filling = held, *previous = held ? held + batch : NULL;
    int filled = 0, previous_n = 0;
    unsigned long long device_ns = 0;
    cl_event marker = NULL; /* --batched: the previous batch's marker */
    double t0 = now_ns();
    for (int i = 0; i < kernels; i++) {
        cl_event ev = NULL;
        if (clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, events || batch ? &ev : NULL) != CL_SUCCESS) return 3;
        if (batch) {
            filling[filled++] = ev;
            if (filled == batch) {
                device_ns += harvest(previous, previous_n, out_of_order);
                cl_event* t = previous; previous = filling; filling = t;
                previous_n = filled; filled = 0;
            }
        } else if (ev) {
            clReleaseEvent(ev);
        }
        if (marker_every && (i + 1) % marker_every == 0) {
            cl_event next = NULL;
            clEnqueueMarkerWithWaitList(q, 0, NULL, &next);
            if (marker) { clWaitForEvents(1, &marker); clReleaseEvent(marker); }
            marker = next;
        }
    }
    clFinish(q);
    if (marker) clReleaseEvent(marker);
    if (batch) {
        device_ns += harvest(previous, previous_n, out_of_order);
        device_ns += harvest(filling, filled, out_of_order);
    }
    double t1 = now_ns();
    free(held);
    int out[1];
    clEnqueueReadBuffer(q, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
    if (out[0] != kernels + 100) { fprintf(stderr, "wrong result %d\n", out[0]); return 3; }
    free(zero);
    cl_device_type type;
    double t2 = now_ns();
    for (int i = 0; i < calls; i++) clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    double t3 = now_ns();
    printf("kernels %d: %.1f ns/kernel\n", kernels, (t1 - t0) / kernels);
    printf("calls %d: %.1f ns/call\n", calls, calls > 0 ? (t3 - t2) / calls : 0.0);
    if (batch) printf("device %llu ns in %d kernels\n", device_ns, kernels);
    clReleaseMemObject(b); clReleaseKernel(k); clReleaseProgram(prog); clReleaseCommandQueue(q); clReleaseContext(ctx);
    return 0;
}
