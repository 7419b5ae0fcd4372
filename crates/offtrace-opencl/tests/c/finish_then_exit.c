/* finish_then_exit: enqueues N kernels on an in-order queue, calls clFinish and returns from
 * main at once (no read, no release). Every kernel completed before the exit: the layer, whose
 * harvest thread reports them after the clFinish, must report each with its device times, also
 * when the thread had no time to (its stop at exit reports what the clFinish made known).
 * `finish_then_exit N atexit`: the clFinish runs in an exit handler registered before the first
 * OpenCL call, which runs after the layer's own (the harvest thread is stopped by then). */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cl_command_queue q;
static void finish_at_exit(void) { clFinish(q); }

int main(int argc, char** argv) {
    int kernels = argc > 1 ? atoi(argv[1]) : 5000;
    int in_handler = argc > 2 && !strcmp(argv[2], "atexit");
    if (in_handler) atexit(finish_at_exit);
    const char* want = getenv("OFFTRACE_CL_PLATFORM");
    cl_platform_id ps[8];
    cl_uint np = 0;
    cl_device_id d = NULL;
    cl_platform_id p = NULL;
    clGetPlatformIDs(8, ps, &np);
    for (cl_uint i = 0; i < np && !p; i++) {
        char name[256] = {0};
        clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
        if ((!want || strstr(name, want)) && clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 1, &d, NULL) == CL_SUCCESS) p = ps[i];
    }
    if (!p) return 2;
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
    q = clCreateCommandQueueWithProperties(ctx, d, NULL, &err);
    /* In the handler's case each kernel loops a while: most are still queued when main returns
     * and the layer stops, so the handler's clFinish is what completes them. */
    const char* src = in_handler
        ? "__kernel void k(__global int* x) { for (int i = 0; i < 4000; i++) x[get_global_id(0)] += i & 1; }"
        : "__kernel void k(__global int* x) { x[get_global_id(0)] += 1; }";
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 1, &d, "", NULL, NULL);
    cl_kernel k = clCreateKernel(prog, "k", &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(int), NULL, &err);
    clSetKernelArg(k, 0, sizeof b, &b);
    size_t g = 64;
    for (int i = 0; i < kernels; i++) {
        if (clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL) != CL_SUCCESS) return 3;
    }
    if (!in_handler && clFinish(q) != CL_SUCCESS) return 4;
    return 0;
}
