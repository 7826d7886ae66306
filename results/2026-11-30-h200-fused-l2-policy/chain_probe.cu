// What a one-kernel graph replay costs per step, replayed back to back (as metaprep's step_us
// for graph arms), for kernels that do less than any prep can: nothing; one load and one
// store; the two dependent loads every DSA page copy needs (a request's length or pool row,
// then its req_to_token slots) and a store. Against these, issue 12's bar of 1.5x the
// one-node empty graph at batch <= 64.
//   nvcc -O3 -arch=sm_90 -o chain_probe chain_probe.cu && ./chain_probe
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); return 1; } } while (0)

__global__ void empty_kernel() {}
__global__ void load_store(const int* a, int* out) { if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = a[0]; }
__global__ void two_hops(const int* a, const int* table, int* out) {
    const int i = a[blockIdx.x];       // every block reads its request's entry
    if (blockIdx.x != 0) return;       // only block 0 has work, as at batch 1
    out[threadIdx.x] = table[i + threadIdx.x];
}

int main() {
    int *a, *table, *out;
    CK(cudaMalloc(&a, 1 << 20)); CK(cudaMalloc(&table, 1 << 24)); CK(cudaMalloc(&out, 1 << 20));
    CK(cudaMemset(a, 0, 1 << 20)); CK(cudaMemset(table, 0, 1 << 24));
    cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    struct V { const char* name; std::function<void()> k; };
    std::vector<V> vs = {
        {"empty kernel <<<1, 32>>>", [&] { empty_kernel<<<1, 32, 0, s>>>(); }},
        {"one load, one store <<<1, 32>>>", [&] { load_store<<<1, 32, 0, s>>>(a, out); }},
        {"two dependent loads, store <<<1, 256>>>", [&] { two_hops<<<1, 256, 0, s>>>(a, table, out); }},
        {"two dependent loads, store <<<256, 256>>>", [&] { two_hops<<<256, 256, 0, s>>>(a, table, out); }},
    };
    std::vector<cudaGraphExec_t> ex(vs.size());
    for (size_t v = 0; v < vs.size(); ++v) {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal)); vs[v].k(); CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ex[v], g, 0)); CK(cudaGraphUpload(ex[v], s));
    }
    const int steps = 2000, rounds = 15;
    std::vector<std::vector<double>> us(vs.size());
    for (int r = 0; r < rounds; ++r)
        for (size_t v = 0; v < vs.size(); ++v) {
            for (int i = 0; i < 100; ++i) CK(cudaGraphLaunch(ex[v], s));
            CK(cudaStreamSynchronize(s));
            auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < steps; ++i) CK(cudaGraphLaunch(ex[v], s));
            CK(cudaStreamSynchronize(s));
            us[v].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / steps);
        }
    std::sort(us[0].begin(), us[0].end());
    const double empty = us[0][rounds / 2];
    printf("| one-kernel graph, replayed back to back | median us/step | min..max | x empty |\n|---|---:|---:|---:|\n");
    for (size_t v = 0; v < vs.size(); ++v) {
        std::sort(us[v].begin(), us[v].end());
        printf("| %s | %.2f | %.2f..%.2f | %.2f |\n", vs[v].name, us[v][rounds / 2], us[v][0], us[v][rounds - 1], us[v][rounds / 2] / empty);
    }
    return 0;
}
