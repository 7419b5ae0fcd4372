// A CUDA program whose device busy time follows a known pattern, for checking PM sampling's
// utilisation curve against the kernels' device activity in the same trace
// (scripts/metrics/pm_vs_kernels.py). Each window of WINDOW_US microseconds launches one
// spin kernel (every SM busy: 4 blocks per SM) lasting duty% of the window, waits for it and
// idles the rest; the duty cycles step 0,10,...,100,...,0 % and repeat, then come as short
// bursts (many 100-300 us kernels with gaps), so the curve has sub-window detail.
//
//   nvcc -O2 -arch=sm_90 -o pm_duty examples/cuda/pm_duty.cu && ./pm_duty [repeats]
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__global__ void spin(long long ns) {
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

static double now_us() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void idle_until(double t_us) {
  while (now_us() < t_us) {
    double left = t_us - now_us();
    if (left > 200) {
      struct timespec s = {0, (long)((left - 100) * 1000)};
      nanosleep(&s, NULL);
    }
  }
}

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? atoi(argv[1]) : 3;
  const double WINDOW_US = 10000;
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int blocks = sms * 4;
  spin<<<blocks, 256>>>(1000);  // context and module load before the first window
  cudaDeviceSynchronize();
  idle_until(now_us() + 20000);
  int launches = 0;
  double busy_us = 0;
  double t = now_us();
  for (int r = 0; r < repeats; r++) {
    for (int i = 0; i <= 20; i++) {
      int duty = i <= 10 ? i * 10 : (20 - i) * 10;
      if (duty > 0) {
        spin<<<blocks, 256>>>((long long)(WINDOW_US * duty / 100.0 * 1000));
        launches++;
        busy_us += WINDOW_US * duty / 100.0;
        cudaDeviceSynchronize();
      }
      t += WINDOW_US;
      idle_until(t);
    }
  }
  // Bursts: 100-300 us kernels separated by 200-600 us of idle.
  srand(15);
  double end = t + 200000;
  while (now_us() < end) {
    int k_us = 100 + rand() % 201, gap_us = 200 + rand() % 401;
    spin<<<blocks, 256>>>((long long)k_us * 1000);
    launches++;
    busy_us += k_us;
    cudaDeviceSynchronize();
    idle_until(now_us() + gap_us);
  }
  idle_until(now_us() + 20000);
  cudaError_t e = cudaGetLastError();
  printf("{\"launches\":%d,\"busy_us\":%.0f,\"sms\":%d,\"error\":\"%s\"}\n", launches, busy_us, sms,
         cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
