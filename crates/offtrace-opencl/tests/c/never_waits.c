/* never_waits: enqueues kernels on an in-order queue and never calls a waiting function of
 * OpenCL (no clFinish, clWaitForEvents or blocking command): it polls its last event's status
 * with clGetEventInfo, sleeps a while and exits. The layer, which completes the commands of
 * in-order queues in batches, must still report every one of them with its device times. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char** argv) {
    int kernels = argc > 1 ? atoi(argv[1]) : 50;
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
    cl_command_queue q = clCreateCommandQueueWithProperties(ctx, d, NULL, &err);
    const char* src = "__kernel void k(__global int* x) { x[get_global_id(0)] += 1; }";
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 1, &d, "", NULL, NULL);
    cl_kernel k = clCreateKernel(prog, "k", &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(int), NULL, &err);
    clSetKernelArg(k, 0, sizeof b, &b);
    size_t g = 64;
    cl_event last = NULL;
    for (int i = 0; i < kernels; i++) {
        err = clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, i == kernels - 1 ? &last : NULL);
        if (err != CL_SUCCESS) return 3;
    }
    clFlush(q);
    cl_int status = CL_QUEUED;
    while (status != CL_COMPLETE) {
        if (clGetEventInfo(last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) != CL_SUCCESS) return 4;
        if (status < 0) return 5;
    }
    struct timespec t = {0, 200 * 1000 * 1000};
    nanosleep(&t, NULL);
    printf("never_waits: %d kernels complete\n", kernels);
    return 0;
}
