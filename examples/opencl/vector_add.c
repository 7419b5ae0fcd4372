/* vector_add: a plain OpenCL program (no offtrace code) used to check the OpenCL layer.
 *
 *   cc -O2 examples/opencl/vector_add.c -lOpenCL -o vector_add
 *   ./vector_add [--profile] [--iters N] [--platform SUBSTRING] [--legacy-queue]
 *   OPENCL_LAYERS=$PWD/target/debug/libofftrace_opencl.so ./vector_add   (or: offtrace record -- ./vector_add)
 *
 * Enqueues 2 writes, 1 fill, N kernels, 1 buffer copy, 1 read, 1 map and 1 unmap on one in-order
 * queue, checks the result and prints what it enqueued. With --profile the queue has
 * CL_QUEUE_PROFILING_ENABLE and the program prints each command's END - START; without it the
 * program checks that profiling looks off (as the runtime would answer: the layer must not show
 * its own profiling). --legacy-queue creates the queue with the OpenCL 1.x clCreateCommandQueue.
 * Exit status: 0 ok, 2 no platform/device, 3 wrong result or wrong answer.
 */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, e_); exit(3); } } while (0)

static const char* SRC =
    "__kernel void vadd(__global const float* a, __global const float* b, __global float* c, float s) {\n"
    "    size_t i = get_global_id(0);\n"
    "    c[i] = a[i] + s * b[i];\n"
    "}\n";

static int pick(const char* want, cl_platform_id* out_p, cl_device_id* out_d) {
    cl_platform_id ps[16];
    cl_uint n = 0;
    if (clGetPlatformIDs(16, ps, &n) != CL_SUCCESS || n == 0) return 0;
    for (cl_uint i = 0; i < n && i < 16; i++) {
        char name[256] = {0};
        clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
        if (want && !strstr(name, want)) continue;
        if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 1, out_d, NULL) == CL_SUCCESS) {
            *out_p = ps[i];
            return 1;
        }
    }
    return 0;
}

int main(int argc, char** argv) {
    int profile = 0, iters = 8, legacy = 0;
    const char* want = getenv("OFFTRACE_CL_PLATFORM");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--platform") && i + 1 < argc) want = argv[++i];
        else if (!strcmp(argv[i], "--legacy-queue")) legacy = 1;
    }
    cl_platform_id platform;
    cl_device_id device;
    if (!pick(want, &platform, &device)) {
        fprintf(stderr, "vector_add: no OpenCL platform%s%s\n", want ? " matching " : "", want ? want : "");
        return 2;
    }
    char pname[256] = {0};
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof pname, pname, NULL);
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    CHECK(err);
    cl_queue_properties props[] = {CL_QUEUE_PROPERTIES, profile ? CL_QUEUE_PROFILING_ENABLE : 0, 0};
    cl_command_queue q = legacy ? clCreateCommandQueue(ctx, device, profile ? CL_QUEUE_PROFILING_ENABLE : 0, &err)
                                : clCreateCommandQueueWithProperties(ctx, device, props, &err);
    CHECK(err);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &SRC, NULL, &err);
    CHECK(err);
    CHECK(clBuildProgram(prog, 1, &device, "", NULL, NULL));
    cl_kernel k = clCreateKernel(prog, "vadd", &err);
    CHECK(err);

    enum { N = 1 << 16 };
    size_t bytes = N * sizeof(float);
    float* a = malloc(bytes);
    float* b = malloc(bytes);
    float* out = malloc(bytes);
    for (int i = 0; i < N; i++) { a[i] = (float)i; b[i] = 2.0f; }
    cl_mem da = clCreateBuffer(ctx, CL_MEM_READ_ONLY, bytes, NULL, &err); CHECK(err);
    cl_mem db = clCreateBuffer(ctx, CL_MEM_READ_ONLY, bytes, NULL, &err); CHECK(err);
    cl_mem dc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err); CHECK(err);
    cl_mem dd = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err); CHECK(err);

    int n_events = 0;
    cl_event* ev = calloc((size_t)iters + 8, sizeof(cl_event));
    const char** what = calloc((size_t)iters + 8, sizeof(char*));
#define EV (what[n_events] = cmd, &ev[n_events++])
    const char* cmd;
    cmd = "write"; CHECK(clEnqueueWriteBuffer(q, da, CL_FALSE, 0, bytes, a, 0, NULL, EV));
    cmd = "write"; CHECK(clEnqueueWriteBuffer(q, db, CL_FALSE, 0, bytes, b, 0, NULL, EV));
    float zero = 0.0f;
    cmd = "fill"; CHECK(clEnqueueFillBuffer(q, dc, &zero, sizeof zero, 0, bytes, 0, NULL, EV));
    float s = 0.5f;
    CHECK(clSetKernelArg(k, 0, sizeof da, &da));
    CHECK(clSetKernelArg(k, 1, sizeof db, &db));
    CHECK(clSetKernelArg(k, 2, sizeof dc, &dc));
    CHECK(clSetKernelArg(k, 3, sizeof s, &s));
    size_t global = N;
    for (int i = 0; i < iters; i++) {
        cmd = "kernel"; CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, EV));
    }
    cmd = "copy"; CHECK(clEnqueueCopyBuffer(q, dc, dd, 0, 0, bytes, 0, NULL, EV));
    cmd = "read"; CHECK(clEnqueueReadBuffer(q, dd, CL_TRUE, 0, bytes, out, 0, NULL, EV));
    cmd = "map";
    float* m = clEnqueueMapBuffer(q, dd, CL_TRUE, CL_MAP_READ, 0, bytes, 0, NULL, EV, &err);
    CHECK(err);
    float first = m[1];
    cmd = "unmap"; CHECK(clEnqueueUnmapMemObject(q, dd, m, 0, NULL, EV));
    CHECK(clFinish(q));

    int bad = 0;
    double sum = 0;
    for (int i = 0; i < N; i++) {
        if (out[i] != a[i] + 1.0f) bad++;
        sum += out[i];
    }
    if (first != out[1]) bad++;
    printf("vector_add: platform \"%s\", %d elements, checksum %.1f, %s\n", pname, N, sum, bad ? "WRONG" : "ok");
    printf("enqueued kernels=%d copies=4 fills=1 maps=1 unmaps=1\n", iters);

    cl_command_queue_properties qp = 0;
    CHECK(clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof qp, &qp, NULL));
    for (int i = 0; i < n_events; i++) {
        cl_ulong t0 = 0, t1 = 0;
        cl_int r0 = clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
        cl_int r1 = clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
        if (profile) {
            if (r0 != CL_SUCCESS || r1 != CL_SUCCESS) { fprintf(stderr, "profiling query failed: %d %d\n", r0, r1); bad++; }
            printf("profile %s %d %llu\n", what[i], i, (unsigned long long)(t1 - t0));
        } else if (r0 != CL_PROFILING_INFO_NOT_AVAILABLE || r1 != CL_PROFILING_INFO_NOT_AVAILABLE) {
            fprintf(stderr, "profiling visible on a queue without it: %d %d\n", r0, r1);
            bad++;
        }
        clReleaseEvent(ev[i]);
    }
    if (!!(qp & CL_QUEUE_PROFILING_ENABLE) != profile) { fprintf(stderr, "CL_QUEUE_PROPERTIES = 0x%llx\n", (unsigned long long)qp); bad++; }
    else printf("queue properties as created: 0x%llx\n", (unsigned long long)qp);

    clReleaseMemObject(da); clReleaseMemObject(db); clReleaseMemObject(dc); clReleaseMemObject(dd);
    clReleaseKernel(k); clReleaseProgram(prog); clReleaseCommandQueue(q); clReleaseContext(ctx);
    free(a); free(b); free(out); free(ev); free(what);
    return bad ? 3 : 0;
}
