/* Parts of memory objects: sub-buffers, rectangular copies and image commands, each moving a
 * region smaller than its objects, so a trace that counts an object's size instead of the
 * region's bytes (or a sub-buffer's bytes once more than its parent's) shows it.
 *
 *   ./regions [--platform SUBSTRING]     (default: the first platform)
 *
 * Objects: two 64 KiB buffers (`whole`, `other`), two 16 KiB sub-buffers of `whole` (a kernel
 * runs on the second), and, where the device has images, two 64 x 32 CL_R / CL_FLOAT images
 * (8 KiB each). Every object lives until the end. Commands on one in-order queue, each on a
 * region of 16 x 8 floats (512 bytes) unless said: a rect write, a rect copy and a rect read
 * (host/buffer row pitch 256 bytes); then an image write, an image copy, an image read, an image
 * fill, an image-to-buffer copy, a buffer-to-image copy, and a map of an image (region 16 x 8)
 * with its unmap. Prints "cmd LABEL BYTES" per command, in order, and "objects ..." once.
 */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, e_); exit(3); } } while (0)
#define BIG (64 * 1024)
#define SUB (16 * 1024)
#define IW 64
#define IH 32
#define RW 16 /* region: RW x RH floats */
#define RH 8

static const char *src = "__kernel void add_one(__global float *a) { a[get_global_id(0)] += 1.0f; }\n";

int main(int argc, char **argv) {
    const char *want = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--platform") && i + 1 < argc) want = argv[++i];
        else { fprintf(stderr, "usage: %s [--platform SUBSTRING]\n", argv[0]); return 2; }
    }
    cl_platform_id plats[16];
    cl_uint np = 0;
    CHECK(clGetPlatformIDs(16, plats, &np));
    cl_platform_id plat = NULL;
    char pname[256] = "";
    for (cl_uint i = 0; i < np && !plat; i++) {
        CHECK(clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof pname, pname, NULL));
        if (!want || strstr(pname, want)) plat = plats[i];
    }
    if (!plat) { fprintf(stderr, "no platform matches \"%s\"\n", want); return 2; }
    cl_device_id dev;
    CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
    cl_bool img = CL_FALSE;
    CHECK(clGetDeviceInfo(dev, CL_DEVICE_IMAGE_SUPPORT, sizeof img, &img, NULL));
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err); CHECK(err);
    cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err); CHECK(err);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err); CHECK(err);
    CHECK(clBuildProgram(prog, 1, &dev, NULL, NULL, NULL));
    cl_kernel k = clCreateKernel(prog, "add_one", &err); CHECK(err);

    cl_mem whole = clCreateBuffer(ctx, CL_MEM_READ_WRITE, BIG, NULL, &err); CHECK(err);
    cl_mem other = clCreateBuffer(ctx, CL_MEM_READ_WRITE, BIG, NULL, &err); CHECK(err);
    cl_buffer_region r1 = {0, SUB}, r2 = {BIG / 2, SUB};
    cl_mem sub1 = clCreateSubBuffer(whole, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r1, &err); CHECK(err);
    cl_mem sub2 = clCreateSubBuffer(whole, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r2, &err); CHECK(err);
    printf("objects whole %p other %p sub1 %p sub2 %p images %s\n", (void *)whole, (void *)other, (void *)sub1,
           (void *)sub2, img ? "yes" : "no");

    static float host[BIG / sizeof(float)];
    for (size_t i = 0; i < BIG / sizeof(float); i++) host[i] = (float)i;
    CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &sub2));
    size_t g = SUB / sizeof(float);
    CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL));
    printf("cmd kernel 0\n");

    const size_t region_bytes = RW * sizeof(float) * RH;
    size_t o[3] = {0, 0, 0}, bo[3] = {RW * sizeof(float), 2, 0}, reg[3] = {RW * sizeof(float), RH, 1};
    size_t pitch = IW * sizeof(float);
    CHECK(clEnqueueWriteBufferRect(q, other, CL_TRUE, bo, o, reg, pitch, 0, pitch, 0, host, 0, NULL, NULL));
    printf("cmd write_rect %zu\n", region_bytes);
    CHECK(clEnqueueCopyBufferRect(q, other, whole, bo, o, reg, pitch, 0, pitch, 0, 0, NULL, NULL));
    printf("cmd copy_rect %zu\n", region_bytes);
    CHECK(clEnqueueReadBufferRect(q, whole, CL_TRUE, o, o, reg, pitch, 0, pitch, 0, host, 0, NULL, NULL));
    printf("cmd read_rect %zu\n", region_bytes);

    cl_mem ia = NULL, ib = NULL;
    if (img) {
        cl_image_format fmt = {CL_R, CL_FLOAT};
        cl_image_desc desc = {CL_MEM_OBJECT_IMAGE2D, IW, IH, 0, 0, 0, 0, 0, 0, {NULL}};
        ia = clCreateImage(ctx, CL_MEM_READ_WRITE, &fmt, &desc, NULL, &err); CHECK(err);
        ib = clCreateImage(ctx, CL_MEM_READ_WRITE, &fmt, &desc, NULL, &err); CHECK(err);
        size_t io[3] = {2, 1, 0}, ir[3] = {RW, RH, 1};
        CHECK(clEnqueueWriteImage(q, ia, CL_TRUE, io, ir, 0, 0, host, 0, NULL, NULL));
        printf("cmd image_write %zu\n", region_bytes);
        CHECK(clEnqueueCopyImage(q, ia, ib, io, o, ir, 0, NULL, NULL));
        printf("cmd image_copy %zu\n", region_bytes);
        CHECK(clEnqueueReadImage(q, ib, CL_TRUE, o, ir, 0, 0, host, 0, NULL, NULL));
        printf("cmd image_read %zu\n", region_bytes);
        float colour[4] = {1.0f, 0, 0, 0};
        CHECK(clEnqueueFillImage(q, ib, colour, io, ir, 0, NULL, NULL));
        printf("cmd image_fill %zu\n", region_bytes);
        CHECK(clEnqueueCopyImageToBuffer(q, ib, other, io, ir, 0, 0, NULL, NULL));
        printf("cmd image_to_buffer %zu\n", region_bytes);
        CHECK(clEnqueueCopyBufferToImage(q, other, ia, 0, io, ir, 0, NULL, NULL));
        printf("cmd buffer_to_image %zu\n", region_bytes);
        size_t row = 0, slice = 0;
        float *p = clEnqueueMapImage(q, ia, CL_TRUE, CL_MAP_READ, io, ir, &row, &slice, 0, NULL, NULL, &err);
        CHECK(err);
        printf("cmd image_map %zu\n", region_bytes);
        CHECK(clEnqueueUnmapMemObject(q, ia, p, 0, NULL, NULL));
        printf("cmd image_unmap %zu\n", region_bytes);
    }
    CHECK(clFinish(q));

    CHECK(clReleaseMemObject(sub1));
    CHECK(clReleaseMemObject(sub2));
    if (img) {
        CHECK(clReleaseMemObject(ia));
        CHECK(clReleaseMemObject(ib));
    }
    CHECK(clReleaseMemObject(whole));
    CHECK(clReleaseMemObject(other));
    clReleaseKernel(k);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    printf("regions: platform \"%s\"\n", pname);
    return 0;
}
