/* mem_and_markers: buffers with each host-pointer flag, a sub-buffer, an SVM allocation, and
 * markers beside a barrier, on one device; prints each object's handle so that the test can find
 * its record (tests/runtimes.rs `*_memory_types_and_markers_*`).
 *
 * Prints: "device <ptr>", then "mem <label> <ptr>" per allocation (label: device, copy_host,
 * use_host, alloc_host, sub_of_alloc_host, svm; svm is skipped on a device without SVM), then
 * "ok". Exit status: 0 ok, 2 no platform/device, 3 an OpenCL call failed.
 */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, e_); exit(3); } } while (0)

static int pick(const char* want, cl_device_id* out_d) {
    cl_platform_id ps[16];
    cl_uint n = 0;
    if (clGetPlatformIDs(16, ps, &n) != CL_SUCCESS || n == 0) return 0;
    for (cl_uint i = 0; i < n && i < 16; i++) {
        char name[256] = {0};
        clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
        if (want && !strstr(name, want)) continue;
        if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 1, out_d, NULL) == CL_SUCCESS) return 1;
    }
    return 0;
}

int main(void) {
    cl_device_id device;
    if (!pick(getenv("OFFTRACE_CL_PLATFORM"), &device)) {
        fprintf(stderr, "mem_and_markers: no OpenCL platform\n");
        return 2;
    }
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    CHECK(err);
    cl_command_queue q = clCreateCommandQueueWithProperties(ctx, device, NULL, &err);
    CHECK(err);
    printf("device %p\n", (void*)device);

    enum { N = 4096 };
    static char host[N] __attribute__((aligned(4096)));
    memset(host, 1, N);
    cl_mem dev = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N, NULL, &err);
    CHECK(err);
    cl_mem copy_host = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, N, host, &err);
    CHECK(err);
    cl_mem use_host = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, N, host, &err);
    CHECK(err);
    cl_mem alloc_host = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, 2 * N, NULL, &err);
    CHECK(err);
    cl_buffer_region region = {0, N};
    cl_mem sub = clCreateSubBuffer(alloc_host, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    CHECK(err);
    printf("mem device %p\nmem copy_host %p\nmem use_host %p\nmem alloc_host %p\nmem sub_of_alloc_host %p\n",
           (void*)dev, (void*)copy_host, (void*)use_host, (void*)alloc_host, (void*)sub);
    cl_device_svm_capabilities svm_caps = 0;
    clGetDeviceInfo(device, CL_DEVICE_SVM_CAPABILITIES, sizeof svm_caps, &svm_caps, NULL);
    void* svm = svm_caps ? clSVMAlloc(ctx, CL_MEM_READ_WRITE, N, 0) : NULL;
    if (svm) printf("mem svm %p\n", svm);

    cl_event e[3];
    CHECK(clEnqueueMarkerWithWaitList(q, 0, NULL, &e[0]));
    CHECK(clEnqueueMarker(q, &e[1]));
    CHECK(clEnqueueBarrierWithWaitList(q, 0, NULL, &e[2]));
    CHECK(clFinish(q));
    for (int i = 0; i < 3; i++) clReleaseEvent(e[i]);

    if (svm) clSVMFree(ctx, svm);
    clReleaseMemObject(sub);
    clReleaseMemObject(alloc_host);
    clReleaseMemObject(use_host);
    clReleaseMemObject(copy_host);
    clReleaseMemObject(dev);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    printf("ok\n");
    return 0;
}
