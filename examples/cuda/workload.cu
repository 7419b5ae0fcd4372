// The plain CUDA workload of offtrace's GPU tests: kernels, copies both ways (pageable and
// pinned), memsets, three streams with events between them, a CUDA graph (explicit nodes
// and dependencies) and a graph made by stream capture, all deterministic. It checks its own
// results and prints what it launched, so the test compares the trace with these counts (kernels
// that ran: a launch made while its stream is captured runs only as part of the graph's launches):
//
//   kernels: scale x ROUNDS*STREAMS, add x ROUNDS*STREAMS, reduce_sum x 1,
//            graph: scale x GRAPH_LAUNCHES, add x GRAPH_LAUNCHES (graph nodes)
//            captured graph: scale x CAPTURED_LAUNCHES, add x CAPTURED_LAUNCHES
//   copies:  HtoD x (2 + STREAMS*ROUNDS), DtoH x (3 + STREAMS*ROUNDS), DtoD x GRAPH_LAUNCHES (graph)
//   memsets: STREAMS + 1 (+ GRAPH_LAUNCHES in the graph)
//
// Build: nvcc -O2 -arch=sm_90 -cudart shared -o workload workload.cu
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (x);                                                                 \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static const int N = 1 << 20;
static const int STREAMS = 3;
static const int ROUNDS = 4;
static const int GRAPH_LAUNCHES = 5;
static const int CAPTURED_LAUNCHES = 3;

__global__ void scale(float *y, const float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}

__global__ void add(float *y, const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}

__global__ void reduce_sum(const float *x, int n, double *out) {
    __shared__ double part[256];
    double s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
        if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, part[0]);
}

int main() {
    const size_t bytes = N * sizeof(float);
    const int block = 256, grid = (N + block - 1) / block;
    float *host = (float *)malloc(bytes);  // pageable
    float *pinned;
    CHECK(cudaMallocHost(&pinned, bytes));  // pinned
    for (int i = 0; i < N; i++) host[i] = (float)(i % 97) * 0.5f;

    float *x, *y[STREAMS];
    double *sum;
    CHECK(cudaMalloc(&x, bytes));
    CHECK(cudaMalloc(&sum, sizeof(double)));
    cudaStream_t s[STREAMS];
    cudaEvent_t ready, done[STREAMS];
    CHECK(cudaEventCreate(&ready));
    for (int k = 0; k < STREAMS; k++) {
        CHECK(cudaMalloc(&y[k], bytes));
        CHECK(cudaStreamCreateWithFlags(&s[k], cudaStreamNonBlocking));
        CHECK(cudaEventCreate(&done[k]));
    }

    // 2 HtoD (pageable, pinned) + 1 memset on the legacy stream.
    CHECK(cudaMemcpy(x, host, bytes, cudaMemcpyHostToDevice));
    for (int i = 0; i < N; i++) pinned[i] = host[i];
    CHECK(cudaMemcpy(x, pinned, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(sum, 0, sizeof(double)));
    CHECK(cudaEventRecord(ready, 0));

    // Per stream: wait for x, a memset, then ROUNDS × (HtoD, scale, add, DtoH).
    for (int k = 0; k < STREAMS; k++) {
        CHECK(cudaStreamWaitEvent(s[k], ready, 0));
        CHECK(cudaMemsetAsync(y[k], 0, bytes, s[k]));
        for (int r = 0; r < ROUNDS; r++) {
            CHECK(cudaMemcpyAsync(y[k], pinned, bytes, cudaMemcpyHostToDevice, s[k]));
            scale<<<grid, block, 0, s[k]>>>(y[k], x, (float)(k + 1), N);
            CHECK(cudaGetLastError());
            add<<<grid, block, 0, s[k]>>>(y[k], x, N);
            CHECK(cudaGetLastError());
            CHECK(cudaMemcpyAsync(pinned, y[k], bytes, cudaMemcpyDeviceToHost, s[k]));
        }
        CHECK(cudaEventRecord(done[k], s[k]));
    }
    for (int k = 0; k < STREAMS; k++) CHECK(cudaEventSynchronize(done[k]));
    // The last stream wrote (STREAMS) * x + x last; all streams share `pinned`, so check y[k] below.

    // A graph: memset(y0) -> scale(y0 <- 2x) -> add(y0 += x) -> copy y0 -> y1 (DtoD).
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaGraphCreate(&graph, 0));
    cudaGraphNode_t nset, nscale, nadd, ncopy;
    cudaMemsetParams mp = {};
    mp.dst = y[0];
    mp.value = 0;
    mp.elementSize = 4;
    mp.width = N;
    mp.height = 1;
    CHECK(cudaGraphAddMemsetNode(&nset, graph, nullptr, 0, &mp));
    float a = 2.0f;
    int n = N;
    void *scale_args[] = {&y[0], &x, &a, &n};
    cudaKernelNodeParams kp = {};
    kp.func = (void *)scale;
    kp.gridDim = dim3(grid);
    kp.blockDim = dim3(block);
    kp.kernelParams = scale_args;
    CHECK(cudaGraphAddKernelNode(&nscale, graph, &nset, 1, &kp));
    void *add_args[] = {&y[0], &x, &n};
    kp.func = (void *)add;
    kp.kernelParams = add_args;
    CHECK(cudaGraphAddKernelNode(&nadd, graph, &nscale, 1, &kp));
    CHECK(cudaGraphAddMemcpyNode1D(&ncopy, graph, &nadd, 1, y[1], y[0], bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int g = 0; g < GRAPH_LAUNCHES; g++) CHECK(cudaGraphLaunch(exec, s[0]));
    CHECK(cudaStreamSynchronize(s[0]));

    // Stream capture on s[1]: z = 5x, z += x, captured once (nothing runs), launched
    // CAPTURED_LAUNCHES times; z = 6x after each.
    float *z;
    CHECK(cudaMalloc(&z, bytes));
    cudaGraph_t captured;
    cudaGraphExec_t captured_exec;
    CHECK(cudaStreamBeginCapture(s[1], cudaStreamCaptureModeThreadLocal));
    scale<<<grid, block, 0, s[1]>>>(z, x, 5.0f, N);
    CHECK(cudaGetLastError());
    add<<<grid, block, 0, s[1]>>>(z, x, N);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamEndCapture(s[1], &captured));
    CHECK(cudaGraphInstantiate(&captured_exec, captured, 0));
    for (int g = 0; g < CAPTURED_LAUNCHES; g++) CHECK(cudaGraphLaunch(captured_exec, s[1]));
    CHECK(cudaStreamSynchronize(s[1]));
    float *zh = (float *)malloc(bytes);
    CHECK(cudaMemcpy(zh, z, bytes, cudaMemcpyDeviceToHost));
    int bad_captured = 0;
    for (int i = 0; i < N; i++) bad_captured += zh[i] != 6.0f * ((float)(i % 97) * 0.5f);
    free(zh);
    CHECK(cudaGraphExecDestroy(captured_exec));
    CHECK(cudaGraphDestroy(captured));
    CHECK(cudaFree(z));

    // y1 = 3x now: reduce it and check against the host.
    reduce_sum<<<64, 256>>>(y[1], N, sum);
    CHECK(cudaGetLastError());
    double got;
    CHECK(cudaMemcpy(&got, sum, sizeof(double), cudaMemcpyDeviceToHost));
    double want = 0;
    for (int i = 0; i < N; i++) want += 3.0 * host[i];
    CHECK(cudaMemcpy(host, y[2], bytes, cudaMemcpyDeviceToHost));  // stream 2: 3x + x = 4x
    int bad = bad_captured;
    for (int i = 0; i < N; i++) bad += host[i] != 4.0f * ((float)(i % 97) * 0.5f);
    CHECK(cudaDeviceSynchronize());

    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    for (int k = 0; k < STREAMS; k++) {
        CHECK(cudaFree(y[k]));
        CHECK(cudaStreamDestroy(s[k]));
        CHECK(cudaEventDestroy(done[k]));
    }
    CHECK(cudaEventDestroy(ready));
    CHECK(cudaFree(x));
    CHECK(cudaFree(sum));
    CHECK(cudaFreeHost(pinned));
    free(host);
    double rel = (got - want) / want;
    printf("{\"ok\":%s,\"sum\":%.1f,\"want\":%.1f,\"bad\":%d,"
           "\"expect\":{\"scale\":%d,\"add\":%d,\"reduce_sum\":1,\"HtoD\":%d,\"DtoH\":%d,\"DtoD\":%d,\"memset\":%d,"
           "\"graph_nodes\":4,\"graph_edges\":3,\"graph_kernels\":%d}}\n",
           (bad == 0 && rel < 1e-9 && rel > -1e-9) ? "true" : "false", got, want, bad,
           ROUNDS * STREAMS + GRAPH_LAUNCHES + CAPTURED_LAUNCHES, ROUNDS * STREAMS + GRAPH_LAUNCHES + CAPTURED_LAUNCHES,
           2 + STREAMS * ROUNDS, 3 + STREAMS * ROUNDS, GRAPH_LAUNCHES, 1 + STREAMS + GRAPH_LAUNCHES,
           2 * (GRAPH_LAUNCHES + CAPTURED_LAUNCHES));
    return bad == 0 ? 0 : 1;
}
