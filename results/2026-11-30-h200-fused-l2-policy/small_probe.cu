// Where the fused DSA kernel's time goes at batch <= 64, as step_us sees it: each variant is
// captured in a one-kernel graph and replayed back to back (host wall time per replay), on the
// sweep's inputs (lengths uniform in 2048..8192, width 131072), against the one-node empty graph.
//   nvcc -O3 -arch=sm_90 -std=c++17 -DFAMILY_PATH='"../../kernels/dsa_target_verify.cu"' \
//     -o small_probe small_probe.cu && ./small_probe
#define METAPREP_PAGE_SIZE 256
#define METAPREP_SWA_WINDOW 128
#define METAPREP_DSA_TOPK 2048
#define METAPREP_SWA_ALIGN 64
#define METAPREP_PAGE_COLS_PER_BLOCK 1024
#define METAPREP_DSA_REAL_PAGE_SIZE 64
#define METAPREP_DSA_GRAPH_COL_BLOCK 128
#define METAPREP_DSA_COLS_FROM_DEVICE (-1)
#define METAPREP_DSA_COLS_BY_BLOCK (-2)
#include "../../kernels/common.cuh"
#include "../../kernels/dsa_common.cuh"
#include FAMILY_PATH
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

// dsa_fused with parts left out: kScans the scans block, kPages the page rows, kLengths the
// per-request lengths.
template <bool kScans, bool kPages, bool kLengths>
__global__ void fused_parts(DsaArgs a) {
    const int N = a.tokens;
    if (blockIdx.x == 0) {
        if (!kScans || blockIdx.y != 0) return;
        dsa_scans_block(a);
        if (threadIdx.x == 0) store_kept(a.cu_seqlens_q + a.padded_bs * N, a.padded_bs * N);
        return;
    }
    const int i = blockIdx.x - 1;
    if (kPages) dsa_page_rows(a, i * N, N, METAPREP_DSA_COLS_BY_BLOCK);
    if (kLengths && blockIdx.y == 0) {
        if (threadIdx.x == 0) store_kept(a.cache_seqlens + i, dsa_request_kv(a, i));
        for (int j = threadIdx.x; j < N; j += blockDim.x) dsa_row_outputs(a, i * N + j);
    }
}
__global__ void empty_kernel() {}
__global__ void scans_only(DsaArgs a) { dsa_scans_block(a); }

__global__ void fill_slots(int* p, long long n) {
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x)
        p[k] = (int)((unsigned)(k * 2654435761u) >> 10);
}

int main() {
    const std::string fam = FAMILY_PATH;
    const bool decode = fam.find("decode") != std::string::npos;
    const int N = decode ? 1 : 5, WIDTH = 131072;
    int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    printf("# %s\n", FAMILY_PATH);
    for (int P : {1, 8, 64}) {
        const int R = P * N;
        std::mt19937 rng(7 + P);
        std::vector<int> lens(P), pool(P);
        for (int i = 0; i < P; ++i) { lens[i] = 2048 + rng() % 6145; pool[i] = i; }
        DsaArgs a{};
        int *seq, *pidx, *r2t, *out[8];
        size_t ns[8] = {(size_t)P, (size_t)R + 1, (size_t)P + 1, (size_t)R, (size_t)R, (size_t)R + 1, (size_t)R * WIDTH, (size_t)R * (WIDTH / 64)};
        CK(cudaMalloc(&seq, P * 4)); CK(cudaMemcpy(seq, lens.data(), P * 4, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&pidx, P * 4)); CK(cudaMemcpy(pidx, pool.data(), P * 4, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&r2t, (size_t)P * WIDTH * 4)); fill_slots<<<256, 256>>>(r2t, (long long)P * WIDTH);
        for (int k = 0; k < 8; ++k) CK(cudaMalloc(&out[k], ns[k] * 4));
        a.seq_lens = seq; a.req_pool_indices = pidx; a.req_to_token = r2t; a.host_block = nullptr;
        a.cache_seqlens = out[0]; a.cu_seqlens_q = out[1]; a.cu_seqlens_k = out[2]; a.seqlens_expanded = decode ? nullptr : out[3];
        a.dsa_cache_seqlens = out[4]; a.dsa_cu_seqlens_k = out[5]; a.page_table_1 = out[6]; a.real_page_table = out[7];
        a.eager_cols = nullptr; a.padded_bs = P; a.tokens = N; a.req_stride = WIDTH; a.page_width = WIDTH; a.real_width = WIDTH / 64;
        const int gy = std::min(WIDTH / 1024, std::max(1, (16 * sms + P) / (P + 1)));
        const dim3 grid(P + 1, gy), grid8(P + 1, 8);
        struct V { std::string name; std::function<void()> k; };
        std::vector<V> vs = {
            {"empty kernel <<<1, 32>>> (the one-node empty graph)", [&] { empty_kernel<<<1, 32, 0, s>>>(); }},
            {"empty kernel, fused's grid", [&] { empty_kernel<<<grid, 256, 0, s>>>(); }},
            {"dsa_fused (HEAD)", [&] { dsa_fused<<<grid, 256, 0, s>>>(a); }},
            {"dsa_fused, grid.y 8 (live spans only)", [&] { dsa_fused<<<grid8, 256, 0, s>>>(a); }},
            {"no scans block", [&] { fused_parts<false, true, true><<<grid, 256, 0, s>>>(a); }},
            {"no page rows", [&] { fused_parts<true, false, true><<<grid, 256, 0, s>>>(a); }},
            {"no per-request lengths", [&] { fused_parts<true, true, false><<<grid, 256, 0, s>>>(a); }},
            {"page rows only", [&] { fused_parts<false, true, false><<<grid, 256, 0, s>>>(a); }},
            {"scans block only <<<1, 256>>>", [&] { scans_only<<<1, 256, 0, s>>>(a); }},
        };
        std::vector<cudaGraphExec_t> ex(vs.size());
        for (size_t v = 0; v < vs.size(); ++v) {
            cudaGraph_t g;
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal)); vs[v].k(); CK(cudaStreamEndCapture(s, &g));
            CK(cudaGraphInstantiate(&ex[v], g, 0)); CK(cudaGraphUpload(ex[v], s));
        }
        const int steps = 2000, rounds = 11;
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
        for (auto& u : us) std::sort(u.begin(), u.end());
        const double empty = us[0][rounds / 2];
        printf("\n## bs %d, block %d, grid (%d, %d)\n| graph of one kernel | us/step | min..max | x empty graph |\n|---|---:|---:|---:|\n", P, N, P + 1, gy);
        for (size_t v = 0; v < vs.size(); ++v)
            printf("| %s | %.2f | %.2f..%.2f | %.2f |\n", vs[v].name.c_str(), us[v][rounds / 2], us[v][0], us[v][rounds - 1], us[v][rounds / 2] / empty);
        fflush(stdout);
        for (int k = 0; k < 8; ++k) cudaFree(out[k]);
        cudaFree(seq); cudaFree(pidx); cudaFree(r2t);
    }
    return 0;
}
