/* codeplay_counters: uses cl_codeplay_performance_counters as its specification describes
 * (Codeplay's proposal, version 1). No shipping CPU runtime implements the extension; under
 * offtrace's OpenCL layer every device has it.
 *
 *   cc -O2 examples/opencl/codeplay_counters.c -lOpenCL -o codeplay_counters
 *   OPENCL_LAYERS=$PWD/target/debug/libofftrace_opencl.so ./codeplay_counters [--platform SUBSTRING]
 *   (or: offtrace record -- ./codeplay_counters)
 *
 * Lists the device's counters, enables all of them on a queue created with
 * clCreateCommandQueueWithPropertiesKHR, runs a write, a kernel and a read, prints every counter
 * of every command with its unit, then checks the error codes of misuse (unknown uuid, query on
 * a queue without counters, on a user event, with a too small param_value_size).
 * Exit status: 0 ok, 2 no platform or extension missing, 3 a check failed.
 */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the extension's definitions, from its specification ---- */
#define CL_DEVICE_PERFORMANCE_COUNTERS_CODEPLAY 0x4260
#define CL_QUEUE_PERFORMANCE_COUNTERS_CODEPLAY 0x4261
#define CL_PROFILING_COMMAND_PERFORMANCE_COUNTERS_CODEPLAY 0x4262
typedef cl_uint cl_performance_counter_unit_codeplay;
typedef cl_uint cl_performance_counter_storage_codeplay;
enum {
    CL_PERFORMANCE_COUNTER_UNIT_GENERIC_CODEPLAY = 0x0,
    CL_PERFORMANCE_COUNTER_UNIT_PERCENTAGE_CODEPLAY = 0x1,
    CL_PERFORMANCE_COUNTER_UNIT_NANOSECONDS_CODEPLAY = 0x2,
    CL_PERFORMANCE_COUNTER_UNIT_BYTES_CODEPLAY = 0x3,
    CL_PERFORMANCE_COUNTER_UNIT_BYTES_PER_SECOND_CODEPLAY = 0x4,
    CL_PERFORMANCE_COUNTER_UNIT_KELVIN_CODEPLAY = 0x5,
    CL_PERFORMANCE_COUNTER_UNIT_WATTS_CODEPLAY = 0x6,
    CL_PERFORMANCE_COUNTER_UNIT_VOLTS_CODEPLAY = 0x7,
    CL_PERFORMANCE_COUNTER_UNIT_AMPS_CODEPLAY = 0x8,
    CL_PERFORMANCE_COUNTER_UNIT_HERTZ_CODEPLAY = 0x9,
    CL_PERFORMANCE_COUNTER_UNIT_CYCLES_CODEPLAY = 0xA
};
enum {
    CL_PERFORMANCE_COUNTER_RESULT_TYPE_INT32_CODEPLAY = 0x0,
    CL_PERFORMANCE_COUNTER_RESULT_TYPE_INT64_CODEPLAY = 0x1,
    CL_PERFORMANCE_COUNTER_RESULT_TYPE_UINT32_CODEPLAY = 0x2,
    CL_PERFORMANCE_COUNTER_RESULT_TYPE_UINT64_CODEPLAY = 0x3,
    CL_PERFORMANCE_COUNTER_RESULT_TYPE_FLOAT32_CODEPLAY = 0x4,
    CL_PERFORMANCE_COUNTER_RESULT_TYPE_FLOAT64_CODEPLAY = 0x5
};
typedef struct cl_performance_counter_codeplay {
    cl_performance_counter_unit_codeplay unit;
    cl_performance_counter_storage_codeplay storage;
    cl_uint uuid;
    char name[256];
    char category[256];
    char description[256];
} cl_performance_counter_codeplay;
typedef struct cl_performance_counter_desc_codeplay {
    cl_uint uuid;
    void* data;
} cl_performance_counter_desc_codeplay;
typedef struct cl_performance_counter_config_codeplay {
    cl_uint count;
    cl_performance_counter_desc_codeplay* descs;
} cl_performance_counter_config_codeplay;
typedef struct cl_performance_counter_result_codeplay {
    union {
        cl_int int32;
        cl_long int64;
        cl_uint uint32;
        cl_ulong uint64;
        cl_float float32;
        cl_double float64;
    };
} cl_performance_counter_result_codeplay;
typedef cl_command_queue(CL_API_CALL* clCreateCommandQueueWithPropertiesKHR_fn)(cl_context, cl_device_id,
                                                                                const cl_queue_properties*, cl_int*);
/* ---- */

static int failures = 0;
#define EXPECT(what, got, want) do { cl_int g_ = (got); if (g_ != (want)) { \
    fprintf(stderr, "FAIL %s: got %d, want %d\n", what, g_, (want)); failures++; } else printf("misuse: %s -> %d (ok)\n", what, g_); } while (0)
#define CHECK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, e_); exit(3); } } while (0)

static const char* unit_name(cl_uint u) {
    static const char* n[] = {"", "%", "ns", "bytes", "bytes/s", "K", "W", "V", "A", "Hz", "cycles"};
    return u <= 0xA ? n[u] : "?";
}

static void print_value(const cl_performance_counter_codeplay* c, cl_performance_counter_result_codeplay r) {
    switch (c->storage) {
    case CL_PERFORMANCE_COUNTER_RESULT_TYPE_INT32_CODEPLAY: printf("%d", r.int32); break;
    case CL_PERFORMANCE_COUNTER_RESULT_TYPE_INT64_CODEPLAY: printf("%" PRId64, (int64_t)r.int64); break;
    case CL_PERFORMANCE_COUNTER_RESULT_TYPE_UINT32_CODEPLAY: printf("%u", r.uint32); break;
    case CL_PERFORMANCE_COUNTER_RESULT_TYPE_UINT64_CODEPLAY: printf("%" PRIu64, (uint64_t)r.uint64); break;
    case CL_PERFORMANCE_COUNTER_RESULT_TYPE_FLOAT32_CODEPLAY: printf("%g", r.float32); break;
    case CL_PERFORMANCE_COUNTER_RESULT_TYPE_FLOAT64_CODEPLAY: printf("%.6g", r.float64); break;
    }
    printf(" %s", unit_name(c->unit));
}

static const char* SRC = "__kernel void twice(__global float* x) { size_t i = get_global_id(0); x[i] = 2.0f * x[i]; }";

int main(int argc, char** argv) {
    const char* want = getenv("OFFTRACE_CL_PLATFORM");
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--platform") && i + 1 < argc) want = argv[++i];
    cl_platform_id ps[16], platform = NULL;
    cl_device_id device = NULL;
    cl_uint np = 0;
    clGetPlatformIDs(16, ps, &np);
    for (cl_uint i = 0; i < np && !platform; i++) {
        char name[256] = {0};
        clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
        if ((!want || strstr(name, want)) && clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 1, &device, NULL) == CL_SUCCESS)
            platform = ps[i];
    }
    if (!platform) { fprintf(stderr, "codeplay_counters: no OpenCL platform\n"); return 2; }

    size_t n = 0;
    CHECK(clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, 0, NULL, &n));
    char* ext = malloc(n);
    CHECK(clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, n, ext, NULL));
    if (!strstr(ext, "cl_codeplay_performance_counters")) {
        fprintf(stderr, "codeplay_counters: the device does not have cl_codeplay_performance_counters (is the offtrace layer loaded?)\n");
        return 2;
    }
    free(ext);

    size_t bytes = 0;
    CHECK(clGetDeviceInfo(device, CL_DEVICE_PERFORMANCE_COUNTERS_CODEPLAY, 0, NULL, &bytes));
    cl_uint count = (cl_uint)(bytes / sizeof(cl_performance_counter_codeplay));
    cl_performance_counter_codeplay* counters = malloc(bytes);
    CHECK(clGetDeviceInfo(device, CL_DEVICE_PERFORMANCE_COUNTERS_CODEPLAY, bytes, counters, NULL));
    printf("%u counters:\n", count);
    for (cl_uint i = 0; i < count; i++)
        printf("  uuid %u  %-18s %-8s unit %-8s storage %u  %s\n", counters[i].uuid, counters[i].name, counters[i].category,
               unit_name(counters[i].unit), counters[i].storage, counters[i].description);

    clCreateCommandQueueWithPropertiesKHR_fn create_khr = (clCreateCommandQueueWithPropertiesKHR_fn)
        clGetExtensionFunctionAddressForPlatform(platform, "clCreateCommandQueueWithPropertiesKHR");
    if (!create_khr) { fprintf(stderr, "no clCreateCommandQueueWithPropertiesKHR\n"); return 2; }

    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    CHECK(err);
    cl_performance_counter_desc_codeplay* descs = calloc(count, sizeof *descs);
    for (cl_uint i = 0; i < count; i++) descs[i].uuid = counters[i].uuid;
    cl_performance_counter_config_codeplay config = {count, descs};
    cl_queue_properties props[] = {CL_QUEUE_PERFORMANCE_COUNTERS_CODEPLAY, (cl_queue_properties)&config, 0};
    cl_command_queue q = create_khr(ctx, device, props, &err);
    CHECK(err);

    cl_program prog = clCreateProgramWithSource(ctx, 1, &SRC, NULL, &err);
    CHECK(err);
    CHECK(clBuildProgram(prog, 1, &device, "", NULL, NULL));
    cl_kernel k = clCreateKernel(prog, "twice", &err);
    CHECK(err);
    enum { N = 1 << 20 };
    float* host = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) host[i] = (float)i;
    cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    CHECK(err);
    CHECK(clSetKernelArg(k, 0, sizeof buf, &buf));
    size_t global = N;
    cl_event ev[3];
    const char* what[3] = {"write", "kernel", "read"};
    CHECK(clEnqueueWriteBuffer(q, buf, CL_FALSE, 0, N * sizeof(float), host, 0, NULL, &ev[0]));
    CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, &ev[1]));
    CHECK(clEnqueueReadBuffer(q, buf, CL_FALSE, 0, N * sizeof(float), host, 0, NULL, &ev[2]));
    CHECK(clWaitForEvents(3, ev));
    if (host[3] != 6.0f) { fprintf(stderr, "wrong result %f\n", host[3]); failures++; }

    cl_performance_counter_result_codeplay* results = calloc(count, sizeof *results);
    for (int e = 0; e < 3; e++) {
        size_t got = 0;
        CHECK(clGetEventProfilingInfo(ev[e], CL_PROFILING_COMMAND_PERFORMANCE_COUNTERS_CODEPLAY, 0, NULL, &got));
        if (got != count * sizeof *results) { fprintf(stderr, "result size %zu\n", got); failures++; }
        CHECK(clGetEventProfilingInfo(ev[e], CL_PROFILING_COMMAND_PERFORMANCE_COUNTERS_CODEPLAY, count * sizeof *results, results, NULL));
        printf("%s:", what[e]);
        for (cl_uint i = 0; i < count; i++) {
            printf("  %s=", counters[i].name);
            print_value(&counters[i], results[i]);
        }
        printf("\n");
        if (results[0].uint64 == 0) { fprintf(stderr, "FAIL %s: device_time is 0\n", what[e]); failures++; }
        if (e != 1 && results[1].uint64 != N * sizeof(float)) { fprintf(stderr, "FAIL %s: bytes_moved %" PRIu64 "\n", what[e], (uint64_t)results[1].uint64); failures++; }
    }

    /* misuse: the spec's (and the base specification's) error codes */
    cl_performance_counter_desc_codeplay bad_desc = {0xdeadbeef, NULL};
    cl_performance_counter_config_codeplay bad = {1, &bad_desc};
    cl_queue_properties bad_props[] = {CL_QUEUE_PERFORMANCE_COUNTERS_CODEPLAY, (cl_queue_properties)&bad, 0};
    cl_command_queue q_bad = create_khr(ctx, device, bad_props, &err);
    EXPECT("unknown uuid at queue creation", err, CL_INVALID_VALUE);
    if (q_bad) { failures++; clReleaseCommandQueue(q_bad); }
    cl_command_queue plain = clCreateCommandQueueWithProperties(ctx, device, NULL, &err);
    CHECK(err);
    cl_event pev;
    CHECK(clEnqueueWriteBuffer(plain, buf, CL_TRUE, 0, 16, host, 0, NULL, &pev));
    EXPECT("counters of a queue without the property",
           clGetEventProfilingInfo(pev, CL_PROFILING_COMMAND_PERFORMANCE_COUNTERS_CODEPLAY, count * sizeof *results, results, NULL),
           CL_INVALID_VALUE);
    cl_event user = clCreateUserEvent(ctx, &err);
    CHECK(err);
    EXPECT("counters of a user event",
           clGetEventProfilingInfo(user, CL_PROFILING_COMMAND_PERFORMANCE_COUNTERS_CODEPLAY, count * sizeof *results, results, NULL),
           CL_INVALID_VALUE);
    EXPECT("param_value_size too small",
           clGetEventProfilingInfo(ev[1], CL_PROFILING_COMMAND_PERFORMANCE_COUNTERS_CODEPLAY, sizeof *results - 1, results, NULL),
           CL_INVALID_VALUE);
    CHECK(clSetUserEventStatus(user, CL_COMPLETE));

    for (int e = 0; e < 3; e++) clReleaseEvent(ev[e]);
    clReleaseEvent(pev); clReleaseEvent(user);
    clReleaseMemObject(buf); clReleaseKernel(k); clReleaseProgram(prog);
    clReleaseCommandQueue(plain); clReleaseCommandQueue(q); clReleaseContext(ctx);
    free(host); free(counters); free(descs); free(results);
    printf("codeplay_counters: %s\n", failures ? "FAILED" : "ok");
    return failures ? 3 : 0;
}
