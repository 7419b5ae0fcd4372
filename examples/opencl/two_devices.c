/* Two devices of two platforms at once (PoCL and Intel's CPU runtime), as an OpenCL user writes it.
 *
 * One context per device (a context cannot span platforms), an in-order and an out-of-order
 * profiling queue per device. Per device: a write, a kernel, a fill, a copy that waits on both
 * (event wait list on the out-of-order queue), a second kernel after the copy, a marker with a
 * wait list, a map / unmap, a read. Device B's first write waits on a user event of B's context
 * that device A's kernel completion callback sets: B's work starts after A's kernel ended.
 *
 * Prints one line per command, in enqueue order per device:
 *   cmd DEV SEQ LABEL QUEUE QUEUED SUBMIT START END
 * (DEV 0 = PoCL, 1 = Intel; QUEUE "in" or "ooo"; the rest from clGetEventProfilingInfo), then
 * `check ok` when the results are what the kernels computed. Exit 1 on any OpenCL error.
 *
 *   gcc -O1 -o two_devices two_devices.c -lOpenCL
 *   OCL_ICD_VENDORS=DIR ./two_devices      # DIR holding pocl.icd and an ICD naming libintelocl.so
 */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (1 << 18)
#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cl_int e_ = (x);                                                                           \
        if (e_ != CL_SUCCESS) {                                                                    \
            fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, e_);                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const char *SRC = "__kernel void scale(__global float *a, float f) {"
                         "  size_t i = get_global_id(0); a[i] = a[i] * f; }\n"
                         "__kernel void add(__global float *a, __global const float *b) {"
                         "  size_t i = get_global_id(0); a[i] = a[i] + b[i]; }\n";

struct cmd {
    const char *label;
    const char *queue;
    cl_event ev;
};

struct dev {
    cl_device_id id;
    cl_context ctx;
    cl_command_queue in, ooo;
    cl_kernel scale, add;
    cl_mem a, b;
    struct cmd cmds[16];
    int n;
};

static void note(struct dev *d, const char *label, const char *queue, cl_event ev) {
    d->cmds[d->n].label = label;
    d->cmds[d->n].queue = queue;
    d->cmds[d->n].ev = ev;
    d->n++;
}

static cl_device_id find(const char *platform_part) {
    cl_platform_id ps[8];
    cl_uint np = 0;
    CHECK(clGetPlatformIDs(8, ps, &np));
    for (cl_uint i = 0; i < np; i++) {
        char name[256] = {0};
        CHECK(clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name - 1, name, NULL));
        if (strstr(name, platform_part)) {
            cl_device_id d;
            CHECK(clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 1, &d, NULL));
            return d;
        }
    }
    fprintf(stderr, "no platform named *%s* (%u platforms)\n", platform_part, np);
    exit(1);
}

static void setup(struct dev *d, const char *platform_part) {
    cl_int err;
    d->id = find(platform_part);
    d->ctx = clCreateContext(NULL, 1, &d->id, NULL, NULL, &err);
    CHECK(err);
    cl_queue_properties in_p[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
    cl_queue_properties ooo_p[] = {
        CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE | CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0};
    d->in = clCreateCommandQueueWithProperties(d->ctx, d->id, in_p, &err);
    CHECK(err);
    d->ooo = clCreateCommandQueueWithProperties(d->ctx, d->id, ooo_p, &err);
    CHECK(err);
    cl_program p = clCreateProgramWithSource(d->ctx, 1, &SRC, NULL, &err);
    CHECK(err);
    CHECK(clBuildProgram(p, 1, &d->id, "", NULL, NULL));
    d->scale = clCreateKernel(p, "scale", &err);
    CHECK(err);
    d->add = clCreateKernel(p, "add", &err);
    CHECK(err);
    CHECK(clReleaseProgram(p));
    d->a = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    CHECK(err);
    d->b = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    CHECK(err);
}

static cl_event user_b; /* B's user event, set when A's first kernel completed */

static void CL_CALLBACK a_done(cl_event ev, cl_int status, void *data) {
    (void)ev;
    (void)data;
    clSetUserEventStatus(user_b, status == CL_COMPLETE ? CL_COMPLETE : -1);
}

/* Enqueues device D's work. START (or NULL) gates its first write. */
static void enqueue(struct dev *d, float *host, cl_event start, float f) {
    cl_event w, k1, fill, cp, k2, mk, map, unmap, rd;
    size_t gsz = N;
    CHECK(clEnqueueWriteBuffer(d->ooo, d->a, CL_FALSE, 0, N * sizeof(float), host, start ? 1 : 0,
                               start ? &start : NULL, &w));
    note(d, "write", "ooo", w);
    CHECK(clSetKernelArg(d->scale, 0, sizeof(cl_mem), &d->a));
    CHECK(clSetKernelArg(d->scale, 1, sizeof(float), &f));
    CHECK(clEnqueueNDRangeKernel(d->ooo, d->scale, 1, NULL, &gsz, NULL, 1, &w, &k1));
    note(d, "scale", "ooo", k1);
    float one = 1.0f;
    CHECK(clEnqueueFillBuffer(d->ooo, d->b, &one, sizeof one, 0, N * sizeof(float), 0, NULL, &fill));
    note(d, "fill", "ooo", fill);
    /* b = a (after the scale and the fill) */
    cl_event both[2] = {k1, fill};
    CHECK(clEnqueueCopyBuffer(d->ooo, d->a, d->b, 0, 0, N * sizeof(float), 2, both, &cp));
    note(d, "copy", "ooo", cp);
    /* a = a + b = 2 * f * host */
    CHECK(clSetKernelArg(d->add, 0, sizeof(cl_mem), &d->a));
    CHECK(clSetKernelArg(d->add, 1, sizeof(cl_mem), &d->b));
    CHECK(clEnqueueNDRangeKernel(d->ooo, d->add, 1, NULL, &gsz, NULL, 1, &cp, &k2));
    note(d, "add", "ooo", k2);
    CHECK(clEnqueueMarkerWithWaitList(d->ooo, 1, &k2, &mk));
    note(d, "marker", "ooo", mk);
    /* the in-order queue waits on the marker of the other queue (same context) */
    cl_int err;
    float *m = clEnqueueMapBuffer(d->in, d->a, CL_FALSE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                  1024 * sizeof(float), 1, &mk, &map, &err);
    CHECK(err);
    note(d, "map", "in", map);
    CHECK(clWaitForEvents(1, &map));
    m[0] += 1.0f; /* the host's touch, written back by the unmap */
    CHECK(clEnqueueUnmapMemObject(d->in, d->a, m, 0, NULL, &unmap));
    note(d, "unmap", "in", unmap);
    CHECK(clEnqueueReadBuffer(d->in, d->a, CL_FALSE, 0, N * sizeof(float), host, 0, NULL, &rd));
    note(d, "read", "in", rd);
}

static void report(struct dev *d, int which) {
    for (int i = 0; i < d->n; i++) {
        cl_ulong t[4];
        cl_profiling_info what[4] = {CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_SUBMIT,
                                     CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END};
        for (int j = 0; j < 4; j++)
            CHECK(clGetEventProfilingInfo(d->cmds[i].ev, what[j], sizeof(cl_ulong), &t[j], NULL));
        printf("cmd %d %d %s %s %llu %llu %llu %llu\n", which, i, d->cmds[i].label,
               d->cmds[i].queue, (unsigned long long)t[0], (unsigned long long)t[1],
               (unsigned long long)t[2], (unsigned long long)t[3]);
        CHECK(clReleaseEvent(d->cmds[i].ev));
    }
}

int main(void) {
    struct dev d[2];
    memset(d, 0, sizeof d);
    setup(&d[0], "Portable");
    setup(&d[1], "Intel");
    float *host[2];
    for (int k = 0; k < 2; k++) {
        host[k] = malloc(N * sizeof(float));
        for (int i = 0; i < N; i++)
            host[k][i] = (float)(i % 100);
    }
    cl_int err;
    user_b = clCreateUserEvent(d[1].ctx, &err);
    CHECK(err);
    enqueue(&d[0], host[0], NULL, 2.0f);
    CHECK(clSetEventCallback(d[0].cmds[1].ev, CL_COMPLETE, a_done, NULL));
    enqueue(&d[1], host[1], user_b, 3.0f);
    CHECK(clFinish(d[0].in));
    CHECK(clFinish(d[0].ooo));
    CHECK(clFinish(d[1].in));
    CHECK(clFinish(d[1].ooo));
    int bad = 0;
    for (int k = 0; k < 2; k++) {
        float f = k ? 3.0f : 2.0f;
        for (int i = 0; i < N; i++) {
            float want = 2.0f * f * (float)(i % 100) + (i == 0 ? 1.0f : 0.0f);
            if (host[k][i] != want && bad++ < 3)
                fprintf(stderr, "device %d [%d] = %g, want %g\n", k, i, host[k][i], want);
        }
    }
    for (int k = 0; k < 2; k++)
        report(&d[k], k);
    CHECK(clReleaseEvent(user_b));
    for (int k = 0; k < 2; k++) {
        char name[256] = {0};
        CHECK(clGetDeviceInfo(d[k].id, CL_DEVICE_NAME, sizeof name - 1, name, NULL));
        printf("device %d %s\n", k, name);
        clReleaseMemObject(d[k].a);
        clReleaseMemObject(d[k].b);
        clReleaseKernel(d[k].scale);
        clReleaseKernel(d[k].add);
        clReleaseCommandQueue(d[k].in);
        clReleaseCommandQueue(d[k].ooo);
        clReleaseContext(d[k].ctx);
    }
    printf(bad ? "check FAILED\n" : "check ok\n");
    return bad ? 1 : 0;
}
