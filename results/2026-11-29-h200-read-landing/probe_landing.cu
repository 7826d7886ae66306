// Where a small D2H read lands: behind a running kernel, or on an idle stream. For GPU work
// of T us launched just before the read, the host waits D us (spinning) and then reads n ints
// (pageable or pinned, + stream sync). Prints the median time from the read call to its
// return, and the same read's time minus max(0, T - D - launch) would be the "pure" read.
//   nvcc -O2 -arch=sm_90 -o probe_landing probe_landing.cu && ./probe_landing [auto|spin|block]
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
__global__ void busy(long long cycles) { long long t = clock64(); while (clock64() - t < cycles) {} }
static double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static void spin_until(double t) { while (now_us() < t) {} }
static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "auto";
  unsigned flags = !strcmp(mode, "spin") ? cudaDeviceScheduleSpin : !strcmp(mode, "yield") ? cudaDeviceScheduleYield
                 : !strcmp(mode, "block") ? cudaDeviceScheduleBlockingSync : cudaDeviceScheduleAuto;
  cudaSetDeviceFlags(flags);
  int clock_khz; cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  const int n = 256, reps = 400;
  int* d; cudaMalloc(&d, n * 4); cudaMemset(d, 1, n * 4);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  std::vector<int> pageable(n);
  int* pinned; cudaHostAlloc(&pinned, n * 4, 0);
  cudaEvent_t ev; cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  busy<<<1, 1, 0, s>>>(1000); cudaStreamSynchronize(s);
  printf("mode %s, clock %d MHz. columns: T_us D_us | read call->return median (us): pageable, pinned, pinned+event, sync-then-pageable | whole T+read from launch: pageable\n", mode, clock_khz / 1000);
  const double Ts[] = {0, 1, 2, 3, 4, 6, 8, 10, 12, 16, 20};
  const double Ds[] = {0, 2, 4, 6, 8, 10, 12, 14, 18, 22, 26};
  for (double T : Ts) for (double D : Ds) {
    std::vector<double> t[4], whole;
    for (int k = 0; k < reps; ++k) {
      for (int v = 0; v < 4; ++v) {
        double a = now_us();
        if (T > 0) busy<<<1, 1, 0, s>>>((long long)(T * clock_khz / 1000.0));
        spin_until(a + D);
        double b = now_us();
        if (v == 0) { cudaMemcpyAsync(pageable.data(), d, n * 4, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s); }
        if (v == 1) { cudaMemcpyAsync(pinned, d, n * 4, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s); }
        if (v == 2) { cudaMemcpyAsync(pinned, d, n * 4, cudaMemcpyDeviceToHost, s); cudaEventRecord(ev, s); cudaEventSynchronize(ev); }
        if (v == 3) { cudaStreamSynchronize(s); cudaMemcpyAsync(pageable.data(), d, n * 4, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s); }
        double c = now_us();
        t[v].push_back(c - b);
        if (v == 0) whole.push_back(c - a);
      }
    }
    printf("%5.0f %5.0f |", T, D);
    for (auto& v : t) printf(" %7.2f", median(v));
    printf(" | %7.2f\n", median(whole));
    fflush(stdout);
  }
  return 0;
}
