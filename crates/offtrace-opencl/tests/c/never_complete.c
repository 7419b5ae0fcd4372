/* never_complete: enqueues a kernel behind a user event that is never set, then exits without
 * waiting. The layer must report that command as one whose device times never arrived. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

int main(void) {
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
    const char* src = "__kernel void k(__global int* x) { x[0] = 1; }";
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 1, &d, "", NULL, NULL);
    cl_kernel k = clCreateKernel(prog, "k", &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &err);
    clSetKernelArg(k, 0, sizeof b, &b);
    cl_event gate = clCreateUserEvent(ctx, &err);
    size_t g = 1;
    err = clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 1, &gate, NULL);
    clFlush(q);
    printf("never_complete: enqueued behind a user event (%d), exiting\n", err);
    return err == CL_SUCCESS ? 0 : 3;
}
