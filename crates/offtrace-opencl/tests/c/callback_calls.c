/* callback_calls: OpenCL calls the program makes from its own event callback, which the runtime
 * may run inside another OpenCL call of the program's thread (PoCL runs the callback of an event
 * that already completed inside clSetEventCallback). Those calls are the program's, not the
 * implementation of the enclosing call: the trace must keep them, and the fill enqueued in the
 * callback must carry its own call's correlation.
 *
 * Prints `callback on the calling thread: yes|no`, `fill_event 0x...` and `done N` (N = the
 * number of callbacks run). */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cl_command_queue q;
static cl_mem b;
static cl_event gate, fill_ev;
static pthread_t main_thread;
static int same_thread = -1, calls;

static void CL_CALLBACK on_write_done(cl_event ev, cl_int status, void *data) {
    (void)ev;
    (void)data;
    same_thread = pthread_equal(pthread_self(), main_thread) != 0;
    int zero = 0;
    clEnqueueFillBuffer(q, b, &zero, sizeof zero, 0, 4096, 0, NULL, &fill_ev);
    clSetUserEventStatus(gate, status == CL_COMPLETE ? CL_COMPLETE : -1);
    calls++;
}

int main(void) {
    const char *want = getenv("OFFTRACE_CL_PLATFORM");
    cl_platform_id ps[8];
    cl_uint np = 0;
    cl_device_id d = NULL;
    cl_platform_id p = NULL;
    main_thread = pthread_self();
    clGetPlatformIDs(8, ps, &np);
    for (cl_uint i = 0; i < np && !p; i++) {
        char name[256] = {0};
        clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
        if ((!want || strstr(name, want)) && clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 1, &d, NULL) == CL_SUCCESS)
            p = ps[i];
    }
    if (!p) return 2;
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
    q = clCreateCommandQueueWithProperties(ctx, d, NULL, &err);
    b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    gate = clCreateUserEvent(ctx, &err);
    static char host[4096];
    cl_event w;
    if (clEnqueueWriteBuffer(q, b, CL_TRUE, 0, sizeof host, host, 0, NULL, &w) != CL_SUCCESS) return 3;
    /* The write has completed: the runtime may run the callback right here. */
    if (clSetEventCallback(w, CL_COMPLETE, on_write_done, NULL) != CL_SUCCESS) return 4;
    if (clWaitForEvents(1, &gate) != CL_SUCCESS) return 5;
    if (clFinish(q) != CL_SUCCESS) return 6;
    printf("callback on the calling thread: %s\nfill_event %p\ndone %d\n", same_thread ? "yes" : "no",
           (void *)fill_ev, calls);
    clReleaseEvent(fill_ev);
    clReleaseEvent(w);
    clReleaseEvent(gate);
    clReleaseMemObject(b);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return calls == 1 ? 0 : 7;
}
