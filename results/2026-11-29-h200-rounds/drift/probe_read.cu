// Per-round medians of a small D2H read (+ stream sync), to tell whether the bimodal read
// cost seen between sweep rounds follows the host buffer's allocation or time.
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
__global__ void empty() {}
__global__ void busy(long long cycles) { long long t = clock64(); while (clock64() - t < cycles) {} }
static double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "auto";
  unsigned flags = !strcmp(mode, "spin") ? cudaDeviceScheduleSpin : !strcmp(mode, "yield") ? cudaDeviceScheduleYield
                 : !strcmp(mode, "block") ? cudaDeviceScheduleBlockingSync : cudaDeviceScheduleAuto;
  cudaSetDeviceFlags(flags);
  const int n = 256, rounds = 40, reads = 300;
  int* d; cudaMalloc(&d, n * 4); cudaMemset(d, 1, n * 4);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  std::vector<int> fixed_pageable(n);
  int* fixed_pinned; cudaHostAlloc(&fixed_pinned, n * 4, 0);
  empty<<<1, 1, 0, s>>>(); cudaStreamSynchronize(s);
  printf("mode %s: per-round medians (us): pageable-fixed pageable-fresh pinned-fixed pinned-fresh launch+sync fwd20+read\n", mode);
  for (int r = 0; r < rounds; ++r) {
    std::vector<int>* fresh_pageable = new std::vector<int>(n + (r * 37) % 1024);
    int* fresh_pinned; cudaHostAlloc(&fresh_pinned, n * 4, 0);
    std::vector<double> t[6];
    for (int k = 0; k < reads; ++k) {
      int* dst[4] = {fixed_pageable.data(), fresh_pageable->data() + (r * 37) % 1024, fixed_pinned, fresh_pinned};
      for (int v = 0; v < 4; ++v) {
        double a = now_us();
        cudaMemcpyAsync(dst[v], d, n * 4, cudaMemcpyDeviceToHost, s);
        cudaStreamSynchronize(s);
        t[v].push_back(now_us() - a);
      }
      double a = now_us();
      empty<<<1, 1, 0, s>>>(); cudaStreamSynchronize(s);
      t[4].push_back(now_us() - a);
      // a read behind 20 us of GPU work, minus nothing: the step_fwd-like case
      a = now_us();
      busy<<<1, 1, 0, s>>>(20 * 1980);
      cudaMemcpyAsync(fixed_pageable.data(), d, n * 4, cudaMemcpyDeviceToHost, s);
      cudaStreamSynchronize(s);
      t[5].push_back(now_us() - a);
    }
    printf("round %2d:", r);
    for (auto& v : t) printf(" %7.2f", median(v));
    printf("\n");
    fflush(stdout);
    cudaFreeHost(fresh_pinned); delete fresh_pageable;
    // other groups' work between rounds: ~20 ms of GPU copies and launches
    for (int k = 0; k < 2000; ++k) empty<<<1, 1, 0, s>>>();
    cudaStreamSynchronize(s);
  }
  return 0;
}
