// What bandwidth a page-table copy's traffic mix can reach, against the d2d copy metaprep
// takes as its ceiling. A verify/draft-extend page table at batch R, block N reads each
// request's row once and writes it N times. The ideal kernel for that mix: one int4 load,
// N int4 stores. GB/s count bytes read plus written, as metaprep's gb_s does. Each is
// timed both ways: events around one launch (as gpu_prep_us), and back to back (as the
// floor's copy).
//   nvcc -O3 -arch=sm_90 -o probe_mix probe_mix.cu && ./probe_mix
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
__global__ void fan_out(const int4* __restrict__ src, int4* __restrict__ dst, int rows, int cols16, int copies) {
  // block x: one source row; threads stride over its int4 columns; each load goes to `copies` rows
  const int r = blockIdx.x;
  const int4* s = src + (long long)r * cols16;
  int4* d = dst + (long long)r * copies * cols16;
  for (int c = threadIdx.x + blockIdx.y * blockDim.x; c < cols16; c += blockDim.x * gridDim.y) {
    int4 v = __ldg(s + c);
    for (int k = 0; k < copies; ++k) d[(long long)k * cols16 + c] = v;
  }
}
__global__ void write_only(int4* __restrict__ dst, long long n16) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += (long long)gridDim.x * blockDim.x)
    dst[i] = make_int4(1, 2, 3, (int)i);
}
static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
template <class F> static void timed(const char* name, double bytes, F launch) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i) launch();
  std::vector<float> single;
  for (int i = 0; i < 30; ++i) {
    cudaEventRecord(a); launch(); cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); single.push_back(ms);
  }
  cudaEventRecord(a); for (int i = 0; i < 30; ++i) launch(); cudaEventRecord(b); cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b);
  double s1 = median(single) * 1e-3, s2 = ms / 30 * 1e-3;
  printf("%-44s %8.1f MB  one launch %7.1f us %6.0f GB/s | back to back %7.1f us %6.0f GB/s\n", name, bytes / 1e6,
         s1 * 1e6, bytes / s1 / 1e9, s2 * 1e6, bytes / s2 / 1e9);
}
int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t copy_bytes = 64 << 20;
  void *x, *y; cudaMalloc(&x, copy_bytes); cudaMalloc(&y, copy_bytes);
  timed("d2d copy 64 MiB (metaprep's ceiling)", 2.0 * copy_bytes, [&] { cudaMemcpyAsync(y, x, copy_bytes, cudaMemcpyDeviceToDevice); });
  timed("write-only kernel 64 MiB", 1.0 * copy_bytes, [&] { write_only<<<sms * 16, 256>>>((int4*)x, copy_bytes / 16); });
  const int cols = 8192, cols16 = cols / 4;
  for (int R : {1024, 5120}) for (int copies : {1, 2, 5, 8}) {
    if (R == 5120 && copies != 1) continue;
    int4 *src, *dst; cudaMalloc(&src, (size_t)R * cols * 4); cudaMalloc(&dst, (size_t)R * copies * cols * 4);
    cudaMemset(src, 1, (size_t)R * cols * 4);
    double bytes = (double)R * cols * 4 * (1 + copies);
    for (int gy : {1, 2, 8}) {
      char name[96]; snprintf(name, sizeof name, "fan-out %d rows x %d cols, 1 read : %d writes, grid.y %d", R, cols, copies, gy);
      timed(name, bytes, [&] { fan_out<<<dim3(R, gy), 256>>>(src, dst, R, cols16, copies); });
    }
    cudaFree(src); cudaFree(dst);
  }
  return 0;
}
