// Does a read that a kernel writes into mapped pinned memory escape the ~8 us steps a D2H
// copy queued behind running work completes on (probe_landing)? For GPU work of T us
// launched just before the read, the host waits D us, then reads n ints by: a pageable D2H
// copy + stream sync; a pinned D2H copy + sync; a kernel storing them into mapped pinned
// memory + stream sync; the same kernel, the host spinning on a flag the kernel sets after
// the data (no CUDA call). Prints medians of read call -> data on the host (us).
//   nvcc -O2 -arch=sm_90 -o probe_mapped probe_mapped.cu && ./probe_mapped
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
__global__ void busy(long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while ((long long)(t - t0) < ns);
}
__global__ void store_mapped(const int* d, volatile int* host, int n, volatile int* flag, int seq) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) host[i] = d[i];
  __syncthreads();
  if (threadIdx.x == 0) { __threadfence_system(); *flag = seq; }
}
static double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
int main() {
  const int n = 256, reps = 400;
  int* d; cudaMalloc(&d, n * 4); cudaMemset(d, 1, n * 4);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  std::vector<int> pageable(n);
  int* pinned; cudaHostAlloc(&pinned, n * 4, 0);
  int* mapped; cudaHostAlloc(&mapped, (n + 32) * 4, cudaHostAllocMapped);
  int* mapped_dev; cudaHostGetDevicePointer(&mapped_dev, mapped, 0);
  volatile int* flag = mapped + n; int* flag_dev = mapped_dev + n; *flag = 0;
  busy<<<1, 1, 0, s>>>(1000); cudaStreamSynchronize(s);
  printf("read call -> data on host, median us: T_us D_us | pageable-copy pinned-copy mapped-kernel+sync mapped-kernel+flag-spin\n");
  int seq = 0;
  for (double T : {0.0, 1.0, 2.0, 4.0, 10.0, 20.0}) for (double D : {0.0, 2.0, 6.0, 12.0, 30.0}) {
    std::vector<double> t[4];
    for (int k = 0; k < reps; ++k) for (int v = 0; v < 4; ++v) {
      double a = now_us();
      if (T > 0) busy<<<1, 1, 0, s>>>((long long)(T * 1000));
      while (now_us() < a + D) {}
      double b = now_us();
      if (v == 0) { cudaMemcpyAsync(pageable.data(), d, n * 4, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s); }
      if (v == 1) { cudaMemcpyAsync(pinned, d, n * 4, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s); }
      if (v == 2) { store_mapped<<<1, 256, 0, s>>>(d, mapped_dev, n, flag_dev, ++seq); cudaStreamSynchronize(s); }
      if (v == 3) { store_mapped<<<1, 256, 0, s>>>(d, mapped_dev, n, flag_dev, ++seq); while (*flag != seq) {} }
      t[v].push_back(now_us() - b);
      if (v == 3) cudaStreamSynchronize(s);
    }
    printf("%5.0f %5.0f |", T, D);
    for (auto& v : t) printf(" %7.2f", median(v));
    printf("\n");
    fflush(stdout);
  }
  return 0;
}
