/* Three threads, each with its own out-of-order queue, on one context: written from the OpenCL
 * 3.0 specification alone for a user's review of offtrace (docs/history/user-review-2026-11-27.md).
 *
 *   ./ooo_threads [--profile] [--platform SUBSTRING] [--rounds N]
 *
 * Per thread and round: a write gated by a user event the main thread sets once every thread
 * has enqueued it, a kernel on the buffer, a kernel on a sub-buffer, a copy from the NEXT
 * thread's buffer (its wait list names that thread's kernel event: a dependency across queues),
 * a rect copy, a rect read, a marker with a wait list, a fill, a barrier with a wait list, a
 * map and its unmap, and, where the device has images, an image write, an image copy and an
 * image read. Nothing is blocking: the events order the work. With --profile every command's
 * QUEUED / SUBMIT / START / END is printed ("cmd T SEQ LABEL QUEUED SUBMIT START END") after
 * the thread's clFinish, and a "count" line gives what each thread enqueued per label.
 */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, e_); exit(3); } } while (0)
#define THREADS 3
#define N 4096           /* floats per buffer */
#define W 64             /* rect: rows of W floats */
#define MAXCMD 4096

static const char *src =
    "__kernel void scale(__global float *a, float f) { size_t i = get_global_id(0); a[i] = a[i] * f; }\n"
    "__kernel void add_one(__global float *a) { size_t i = get_global_id(0); a[i] = a[i] + 1.0f; }\n";

static cl_context ctx;
static cl_device_id dev;
static cl_program prog;
static int profile, rounds = 2, images;
static size_t sub_origin;          /* bytes: second half, aligned to the device's base alignment */
static cl_mem bufs[THREADS];
static cl_event kernel_done[THREADS];  /* each thread's first kernel of the round, for the next thread */
static cl_event gates[64];  /* one user event per round, made before the threads start */
static pthread_barrier_t published, gated;

struct cmd { const char *label; cl_event ev; };
struct thread { int id; cl_command_queue q; struct cmd cmds[MAXCMD]; int n; float host[N]; float rect[N]; };

static cl_event *rec(struct thread *t, const char *label) {
    if (t->n == MAXCMD) { fprintf(stderr, "too many commands\n"); exit(3); }
    t->cmds[t->n].label = label;
    return &t->cmds[t->n++].ev;
}

static void *run(void *arg) {
    struct thread *t = arg;
    cl_int err;
    cl_queue_properties props[] = {CL_QUEUE_PROPERTIES,
        CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE | (profile ? CL_QUEUE_PROFILING_ENABLE : 0), 0};
    t->q = clCreateCommandQueueWithProperties(ctx, dev, props, &err);
    CHECK(err);
    cl_kernel scale = clCreateKernel(prog, "scale", &err); CHECK(err);
    cl_kernel add_one = clCreateKernel(prog, "add_one", &err); CHECK(err);
    cl_buffer_region region = {sub_origin, N * sizeof(float) - sub_origin};
    cl_mem sub = clCreateSubBuffer(bufs[t->id], CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    CHECK(err);
    cl_mem mine = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err); CHECK(err);
    cl_mem img_a = NULL, img_b = NULL;
    cl_image_format fmt = {CL_R, CL_FLOAT};
    cl_image_desc desc = {CL_MEM_OBJECT_IMAGE2D, W, N / W, 0, 0, 0, 0, 0, 0, {NULL}};
    if (images) {
        img_a = clCreateImage(ctx, CL_MEM_READ_WRITE, &fmt, &desc, NULL, &err); CHECK(err);
        img_b = clCreateImage(ctx, CL_MEM_READ_WRITE, &fmt, &desc, NULL, &err); CHECK(err);
    }
    for (int i = 0; i < N; i++) t->host[i] = (float)(i + t->id);
    float f = 2.0f;
    size_t gsz = N, gsub = (N * sizeof(float) - sub_origin) / sizeof(float);
    for (int r = 0; r < rounds; r++) {
        cl_event *w = rec(t, "write");
        CHECK(clEnqueueWriteBuffer(t->q, bufs[t->id], CL_FALSE, 0, N * sizeof(float), t->host, 1, &gates[r], w));
        CHECK(clSetKernelArg(scale, 0, sizeof(cl_mem), &bufs[t->id]));
        CHECK(clSetKernelArg(scale, 1, sizeof(float), &f));
        cl_event *k1 = rec(t, "scale");
        CHECK(clEnqueueNDRangeKernel(t->q, scale, 1, NULL, &gsz, NULL, 1, w, k1));
        kernel_done[t->id] = *k1;
        pthread_barrier_wait(&published);     /* every thread's kernel event is known */
        if (t->id == 0) pthread_barrier_wait(&gated);  /* main sets the gate after this */
        CHECK(clSetKernelArg(add_one, 0, sizeof(cl_mem), &sub));
        cl_event *k2 = rec(t, "add_one");
        CHECK(clEnqueueNDRangeKernel(t->q, add_one, 1, NULL, &gsub, NULL, 1, k1, k2));
        /* across queues: copy the next thread's buffer once its kernel ran */
        cl_event *c = rec(t, "copy");
        CHECK(clEnqueueCopyBuffer(t->q, bufs[(t->id + 1) % THREADS], mine, 0, 0, N * sizeof(float), 1,
                                  &kernel_done[(t->id + 1) % THREADS], c));
        size_t so[3] = {0, 0, 0}, dor[3] = {W * sizeof(float) / 2, 1, 0}, reg[3] = {W * sizeof(float) / 2, N / W - 1, 1};
        cl_event *cr = rec(t, "copy_rect");
        CHECK(clEnqueueCopyBufferRect(t->q, mine, mine, so, dor, reg, W * sizeof(float), 0, W * sizeof(float), 0, 1, c, cr));
        cl_event *rr = rec(t, "read_rect");
        CHECK(clEnqueueReadBufferRect(t->q, mine, CL_FALSE, so, so, reg, W * sizeof(float), 0, W * sizeof(float), 0,
                                      t->rect, 1, cr, rr));
        cl_event both[2] = {*k2, *rr};
        cl_event *m = rec(t, "marker");
        CHECK(clEnqueueMarkerWithWaitList(t->q, 2, both, m));
        cl_event *fl = rec(t, "fill");
        CHECK(clEnqueueFillBuffer(t->q, mine, &f, sizeof(float), 0, N * sizeof(float) / 2, 1, m, fl));
        cl_event *b = rec(t, "barrier");
        CHECK(clEnqueueBarrierWithWaitList(t->q, 1, fl, b));
        cl_event *mp = rec(t, "map");
        float *p = clEnqueueMapBuffer(t->q, mine, CL_FALSE, CL_MAP_READ | CL_MAP_WRITE, 0, N * sizeof(float) / 4, 1, b, mp, &err);
        CHECK(err);
        CHECK(clWaitForEvents(1, mp));
        p[0] += 1.0f;
        cl_event *um = rec(t, "unmap");
        CHECK(clEnqueueUnmapMemObject(t->q, mine, p, 0, NULL, um));
        if (images) {
            size_t o[3] = {0, 0, 0}, ir[3] = {W, N / W, 1};
            cl_event *iw = rec(t, "image_write");
            CHECK(clEnqueueWriteImage(t->q, img_a, CL_FALSE, o, ir, 0, 0, t->host, 0, NULL, iw));
            cl_event *ic = rec(t, "image_copy");
            CHECK(clEnqueueCopyImage(t->q, img_a, img_b, o, o, ir, 1, iw, ic));
            cl_event *ird = rec(t, "image_read");
            CHECK(clEnqueueReadImage(t->q, img_b, CL_FALSE, o, ir, 0, 0, t->rect, 1, ic, ird));
        }
        CHECK(clFinish(t->q));
        pthread_barrier_wait(&published);   /* round done: kernel_done[] may change */
    }
    CHECK(clFinish(t->q));
    int count[16] = {0};
    const char *labels[16];
    int nl = 0;
    for (int i = 0; i < t->n; i++) {
        int j = 0;
        while (j < nl && strcmp(labels[j], t->cmds[i].label)) j++;
        if (j == nl) labels[nl++] = t->cmds[i].label;
        count[j]++;
        if (profile) {
            cl_ulong v[4];
            cl_profiling_info what[4] = {CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_SUBMIT,
                                         CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END};
            for (int k = 0; k < 4; k++) CHECK(clGetEventProfilingInfo(t->cmds[i].ev, what[k], sizeof(cl_ulong), &v[k], NULL));
            printf("cmd %d %d %s %llu %llu %llu %llu\n", t->id, i, t->cmds[i].label, (unsigned long long)v[0],
                   (unsigned long long)v[1], (unsigned long long)v[2], (unsigned long long)v[3]);
        }
        CHECK(clReleaseEvent(t->cmds[i].ev));
    }
    for (int j = 0; j < nl; j++) printf("count %d %s %d\n", t->id, labels[j], count[j]);
    if (img_a) { clReleaseMemObject(img_a); clReleaseMemObject(img_b); }
    clReleaseMemObject(mine);
    clReleaseMemObject(sub);
    clReleaseKernel(scale);
    clReleaseKernel(add_one);
    clReleaseCommandQueue(t->q);
    return NULL;
}

int main(int argc, char **argv) {
    const char *want = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (!strcmp(argv[i], "--platform") && i + 1 < argc) want = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else { fprintf(stderr, "usage: %s [--profile] [--platform SUBSTRING] [--rounds N]\n", argv[0]); return 2; }
    }
    cl_platform_id plats[8];
    cl_uint np = 0;
    CHECK(clGetPlatformIDs(8, plats, &np));
    cl_platform_id plat = NULL;
    char pname[256] = "";
    for (cl_uint i = 0; i < np && !plat; i++) {
        CHECK(clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof pname, pname, NULL));
        if (!want || strstr(pname, want)) plat = plats[i];
    }
    if (!plat) { fprintf(stderr, "ooo_threads: no platform matching %s\n", want ? want : "(any)"); return 3; }
    CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
    cl_bool img = CL_FALSE;
    CHECK(clGetDeviceInfo(dev, CL_DEVICE_IMAGE_SUPPORT, sizeof img, &img, NULL));
    images = img == CL_TRUE;
    cl_uint align_bits = 0;
    CHECK(clGetDeviceInfo(dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL));
    size_t align = align_bits / 8;
    sub_origin = (N * sizeof(float) / 2 + align - 1) / align * align;
    cl_int err;
    ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err); CHECK(err);
    prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err); CHECK(err);
    CHECK(clBuildProgram(prog, 1, &dev, NULL, NULL, NULL));
    for (int i = 0; i < THREADS; i++) { bufs[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err); CHECK(err); }
    pthread_barrier_init(&published, NULL, THREADS + 1);
    pthread_barrier_init(&gated, NULL, 2);
    struct thread *ts = calloc(THREADS, sizeof *ts);
    pthread_t tids[THREADS];
    if (rounds < 1 || rounds > 64) { fprintf(stderr, "--rounds: 1 to 64\n"); return 2; }
    for (int r = 0; r < rounds; r++) { gates[r] = clCreateUserEvent(ctx, &err); CHECK(err); }
    for (int i = 0; i < THREADS; i++) { ts[i].id = i; pthread_create(&tids[i], NULL, run, &ts[i]); }
    for (int r = 0; r < rounds; r++) {
        pthread_barrier_wait(&published);   /* every write of the round waits on the gate */
        pthread_barrier_wait(&gated);
        CHECK(clSetUserEventStatus(gates[r], CL_COMPLETE));
        pthread_barrier_wait(&published);   /* round done */
        CHECK(clReleaseEvent(gates[r]));
    }
    for (int i = 0; i < THREADS; i++) pthread_join(tids[i], NULL);
    printf("ooo_threads: platform \"%s\", %d threads x %d rounds, images %s\n", pname, THREADS, rounds, images ? "yes" : "no");
    for (int i = 0; i < THREADS; i++) clReleaseMemObject(bufs[i]);
    clReleaseProgram(prog);
    clReleaseContext(ctx);
    free(ts);
    return 0;
}
