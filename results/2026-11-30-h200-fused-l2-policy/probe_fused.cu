// The fused DSA kernel at HEAD (grid (P + 1, spans)) against the page-span walk (grid 1 + G,
// each block one contiguous share of all requests' spans) and an oracle walk told each
// block's start by the host, on the sweep's inputs: lengths uniform in 2048..8192, width
// 131072, pool rows shuffled. Outputs are compared cell for cell against HEAD's (poisoned
// first); times are events around one launch (as metaprep's gpu_prep_us), as a fraction of
// a 64 MiB d2d copy timed back to back (as metaprep's floor), rounds interleaved.
//   nvcc -O3 -arch=sm_90 -std=c++17 -DFAMILY_PATH='"../../kernels/dsa_target_verify.cu"' \
//     -o probe probe_fused.cu && ./probe 1,64,1024 5
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
#include "probe_kernels.cuh"
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

static const int WIDTH = 131072, REAL_WIDTH = WIDTH / 64, SPAN = 1024;
static int N_TOKENS = 5;
static bool VERIFY = false, DECODE = false;

__global__ void fill_slots(int* p, long long n, unsigned seed) {
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)k * 2654435761u ^ seed; x ^= x >> 15; x *= 2246822519u; x ^= x >> 13;
        p[k] = (int)(x & ((1u << 22) - 1));
    }
}

// The page copy alone with each request's column count known (no lengths, no real table):
// block (i, y) copies spans y, y + gy, ... of request i's row into its N rows, `pitch` apart.
__global__ void ideal_fan_out(const int* __restrict__ cols, const int* __restrict__ pool, const int* __restrict__ r2t,
                              int r2t_stride, int* __restrict__ dst, long long pitch, int N) {
    const int i = blockIdx.x, n = cols[i];
    const int* src = r2t + (long long)pool[i] * r2t_stride;
    int* d = dst + (long long)i * N * pitch;
    for (int c = blockIdx.y * 1024 + 4 * threadIdx.x; c < n; c += gridDim.y * 1024) {
        const int4 v = __ldg(reinterpret_cast<const int4*>(src + c));
        for (int r = 0; r < N; ++r) *reinterpret_cast<int4*>(d + r * pitch + c) = v;
    }
}

struct Case {
    int P, N, rows;
    std::vector<int> lens;
    int *seq, *pool, *r2t;
    int* out[8]; size_t out_n[8];
    DsaArgs args;
    double bytes;
};
static int kv_of(int L, int N) { return VERIFY ? L + N : L; }
static int cols_of(int L, int N) { int kv = std::max(kv_of(L, N), 0); int c = (kv + 127) / 128 * 128; return std::min(c, WIDTH); }

static Case make_case(int P, unsigned seed) {
    Case c{}; c.P = P; c.N = N_TOKENS; c.rows = P * c.N;
    std::mt19937 rng(seed);
    c.lens.resize(P);
    for (auto& l : c.lens) l = 2048 + rng() % (8192 - 2048 + 1);
    std::vector<int> pool(P + 1); for (int k = 0; k <= P; ++k) pool[k] = k;
    std::shuffle(pool.begin(), pool.end(), rng); pool.resize(P);
    CK(cudaMalloc(&c.seq, P * 4)); CK(cudaMemcpy(c.seq, c.lens.data(), P * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&c.pool, P * 4)); CK(cudaMemcpy(c.pool, pool.data(), P * 4, cudaMemcpyHostToDevice));
    long long r2t_n = (long long)(P + 1) * WIDTH;
    CK(cudaMalloc(&c.r2t, r2t_n * 4)); fill_slots<<<1024, 256>>>(c.r2t, r2t_n, seed);
    const int R = c.rows;
    size_t ns[8] = {(size_t)P, (size_t)R + 1, (size_t)P + 1, (size_t)R, (size_t)R, (size_t)R + 1, (size_t)R * WIDTH, (size_t)R * REAL_WIDTH};
    for (int k = 0; k < 8; ++k) { c.out_n[k] = ns[k]; CK(cudaMalloc(&c.out[k], ns[k] * 4)); }
    DsaArgs& a = c.args;
    a.seq_lens = c.seq; a.req_pool_indices = c.pool; a.req_to_token = c.r2t; a.host_block = nullptr;
    a.cache_seqlens = c.out[0]; a.cu_seqlens_q = c.out[1]; a.cu_seqlens_k = c.out[2];
    a.seqlens_expanded = DECODE ? nullptr : c.out[3]; a.dsa_cache_seqlens = c.out[4]; a.dsa_cu_seqlens_k = c.out[5];
    a.page_table_1 = c.out[6]; a.real_page_table = c.out[7]; a.eager_cols = nullptr;
    a.padded_bs = P; a.tokens = c.N; a.req_stride = WIDTH; a.page_width = WIDTH; a.real_width = REAL_WIDTH;
    // prep_bytes: dense outputs whole; per request, rows x (cols + real cols) written, 1 + (cols ? 1 + cols : 0) read.
    double dense = P + (R + 1) + (P + 1) + (DECODE ? 0 : R) + R + (R + 1);
    double written = dense, read = 0;
    for (int L : c.lens) { int cols = cols_of(L, c.N); written += (double)c.N * (cols + (cols + 63) / 64); read += 1 + (cols ? 1 + cols : 0); }
    c.bytes = 4 * (read + written);
    return c;
}

static void poison(Case& c) { for (int k = 0; k < 8; ++k) CK(cudaMemset(c.out[k], 0xc4, c.out_n[k] * 4)); }
__global__ void count_diff(const int* a, const int* b, long long n, unsigned long long* bad) {
    unsigned long long mine = 0;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) mine += a[k] != b[k];
    if (mine) atomicAdd(bad, mine);
}
// HEAD's outputs, kept on the device to compare against.
static std::vector<int*> keep(Case& c) {
    std::vector<int*> w(8);
    for (int k = 0; k < 8; ++k) { CK(cudaMalloc(&w[k], c.out_n[k] * 4)); CK(cudaMemcpy(w[k], c.out[k], c.out_n[k] * 4, cudaMemcpyDeviceToDevice)); }
    return w;
}
static unsigned long long differing(Case& c, const std::vector<int*>& want) {
    unsigned long long* d; CK(cudaMalloc(&d, 8)); CK(cudaMemset(d, 0, 8));
    for (int k = 0; k < 8; ++k) count_diff<<<1024, 256>>>(want[k], c.out[k], c.out_n[k], d);
    unsigned long long h; CK(cudaMemcpy(&h, d, 8, cudaMemcpyDeviceToHost)); cudaFree(d);
    return h;
}

static int sms;
static int occ_smem[8];
static int head_grid_y(int rows) { int spans = WIDTH / SPAN; int budget = std::max((16 * sms + rows - 1) / rows, 1); return std::min(spans, budget); }

struct Variant { std::string name; std::function<void()> launch; };

static std::vector<int> oracle_plan(const Case& c, int G) {
    std::vector<long long> start(c.P + 1, 0);
    for (int i = 0; i < c.P; ++i) start[i + 1] = start[i] + (cols_of(c.lens[i], c.N) + SPAN - 1) / SPAN;
    long long total = start[c.P];
    std::vector<int> plan(1 + 2 * G, 0); plan[0] = (int)total;
    for (int b = 0; b < G; ++b) {
        long long lo = total * b / G;
        if (lo >= total) continue;
        int i = int(std::upper_bound(start.begin(), start.end(), lo) - start.begin()) - 1;
        while (start[i + 1] == start[i]) ++i;
        plan[1 + 2 * b] = i; plan[2 + 2 * b] = int(lo - start[i]);
    }
    return plan;
}

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char** argv) {
    const std::string fam = FAMILY_PATH;
    VERIFY = fam.find("verify") != std::string::npos; DECODE = fam.find("decode") != std::string::npos;
    N_TOKENS = DECODE ? 1 : 5;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    std::vector<int> batches;
    std::string list = argc > 1 ? argv[1] : "1024";
    for (char* t = strtok(&list[0], ","); t; t = strtok(nullptr, ",")) batches.push_back(atoi(t));
    const size_t copy_bytes = 64 << 20; void *cx, *cy; CK(cudaMalloc(&cx, copy_bytes)); CK(cudaMalloc(&cy, copy_bytes));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    cudaEvent_t eb[50], ee[50]; for (int i = 0; i < 50; ++i) { CK(cudaEventCreate(&eb[i])); CK(cudaEventCreate(&ee[i])); }
    printf("# %s, %d SMs; registers (local bytes):", FAMILY_PATH, sms);
    const void* fs[] = {(const void*)dsa_fused, (const void*)dsa_fused_lb8, (const void*)dsa_fused_walk, (const void*)dsa_fused_walk_lb8, (const void*)dsa_fused_oracle};
    const char* fn[] = {"head", "head lb8", "walk", "walk lb8", "oracle lb8"};
    for (int k = 0; k < 5; ++k) { cudaFuncAttributes fa; CK(cudaFuncGetAttributes(&fa, fs[k])); printf(" %s %d (%zu)", fn[k], fa.numRegs, fa.localSizeBytes); }
    printf("\n");
    CK(cudaFuncSetAttribute(dsa_fused_occ, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    CK(cudaFuncSetAttribute(dsa_fused_occ, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    for (int k = 2; k <= 6; ++k) {
        for (int smem = 0; smem <= 200 * 1024; smem += 256) {
            int blocks; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, dsa_fused_occ, 256, smem));
            if (blocks <= k) { occ_smem[k] = smem; printf("# %d blocks/SM: %d B dynamic shared memory (occupancy %d)\n", k, smem, blocks); break; }
        }
    }
    for (int P : batches) {
        Case c = make_case(P, 1234 + P);
        int* d_oracle[4] = {};
        int *d_cols = nullptr, *d_compact = nullptr;
        std::vector<Variant> vs;
        int gy = head_grid_y(P + 1);
        vs.push_back({"head (P+1, " + std::to_string(gy) + ")", [&c, P, gy] { dsa_fused<<<dim3(P + 1, gy), 256>>>(c.args); }});
        for (int y : {2, 4}) {
            if (y == gy || P < 256) continue;
            vs.push_back({"head (P+1, " + std::to_string(y) + ")", [&c, P, y] { dsa_fused<<<dim3(P + 1, y), 256>>>(c.args); }});
        }
        for (int k : {4}) {
            const int smem = occ_smem[k];
            vs.push_back({"head " + std::to_string(k) + " blocks/SM (P+1, " + std::to_string(gy) + ")", [&c, P, gy, smem] { dsa_fused_occ<<<dim3(P + 1, gy), 256, smem>>>(c.args); }});
            if (P >= 1024) {
                const int y = std::min(WIDTH / SPAN, std::max(1, (16 * sms * 6 / k + P) / (P + 1)));  // same waves as HEAD
                if (y != gy) vs.push_back({"head " + std::to_string(k) + " blocks/SM (P+1, " + std::to_string(y) + ")", [&c, P, y, smem] { dsa_fused_occ<<<dim3(P + 1, y), 256, smem>>>(c.args); }});
            }
        }
        vs.push_back({"head lb8 (P+1, " + std::to_string(gy) + ")", [&c, P, gy] { dsa_fused_lb8<<<dim3(P + 1, gy), 256>>>(c.args); }});
        {
            std::vector<int> cols(P); for (int i = 0; i < P; ++i) cols[i] = cols_of(c.lens[i], c.N);
            CK(cudaMalloc(&d_cols, P * 4)); CK(cudaMemcpy(d_cols, cols.data(), P * 4, cudaMemcpyHostToDevice));
            CK(cudaMalloc(&d_compact, (size_t)P * c.N * 8448 * 4));
            int* dc = d_cols; int* dk = d_compact;
            for (int y : {gy, 8}) {
                vs.push_back({"ideal copy, pitch 131072 (P, " + std::to_string(y) + ")", [&c, P, y, dc] { ideal_fan_out<<<dim3(P, y), 256>>>(dc, c.pool, c.r2t, WIDTH, c.out[6], WIDTH, c.N); }});
                vs.push_back({"ideal copy, pitch 8448 (P, " + std::to_string(y) + ")", [&c, P, y, dc, dk] { ideal_fan_out<<<dim3(P, y), 256>>>(dc, c.pool, c.r2t, WIDTH, dk, 8448, c.N); }});
            }
        }
        {
            int* dc = d_cols;
            auto part = [&](const char* name, void (*k)(DsaArgs, const int*)) {
                vs.push_back({std::string(name) + " (P+1, " + std::to_string(gy) + ")", [&c, P, gy, dc, k] { k<<<dim3(P + 1, gy), 256>>>(c.args, dc); }});
            };
            part("hints: page .cs", head_hints<true, false, false>);
            part("hints: real evict_last", head_hints<false, true, false>);
            part("hints: page .cs, real evict_last", head_hints<true, true, false>);
            part("hints: page .cs, real + lengths evict_last", head_hints<true, true, true>);
            part("hints: real + lengths evict_last", head_hints<false, true, true>);
            part("parts: no real", head_parts<0, true, false>);
            part("parts: no lengths", head_parts<1, false, false>);
            part("parts: no real, no lengths", head_parts<0, false, false>);
            part("parts: no real, no lengths, known cols", head_parts<0, false, true>);
        }
        // Correctness: every variant's outputs equal HEAD's, cell for cell, over 3 length sets.
        for (int rep = 0; rep < 3; ++rep) {
            if (rep) { std::mt19937 rng(rep * 77 + P); for (auto& l : c.lens) l = (rng() % 5 == 0) ? rng() % 300 : 2048 + rng() % 6145;
                       CK(cudaMemcpy(c.seq, c.lens.data(), P * 4, cudaMemcpyHostToDevice)); }
            poison(c); vs[0].launch(); CK(cudaDeviceSynchronize()); auto want = keep(c);
            size_t checked = 0;
            for (size_t v = 1; v < vs.size(); ++v) {
                if (vs[v].name.rfind("ideal", 0) == 0 || (vs[v].name.rfind("parts: no", 0) == 0) || (vs[v].name.rfind("parts: known", 0) == 0 && rep)) continue;  // incomplete by design
                if (vs[v].name.rfind("oracle", 0) == 0 && rep) continue;  // plans are for the timing lengths
                poison(c); vs[v].launch(); CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
                const unsigned long long bad = differing(c, want);
                ++checked;
                if (bad) { printf("MISMATCH bs %d rep %d %s: %llu cells\n", P, rep, vs[v].name.c_str(), bad); return 1; }
            }
            for (int* w : want) cudaFree(w);
            printf("bs %d lengths %d: %zu variants equal HEAD cell for cell\n", P, rep, checked);
        }
        // restore timing lengths
        { std::mt19937 rng(1234 + P); for (auto& l : c.lens) l = 2048 + rng() % (8192 - 2048 + 1); }
        CK(cudaMemcpy(c.seq, c.lens.data(), P * 4, cudaMemcpyHostToDevice));
        std::vector<std::vector<float>> per(vs.size());
        std::vector<float> ceil_gbs;
        for (int r = 0; r < rounds; ++r) {
            for (int i = 0; i < 3; ++i) CK(cudaMemcpyAsync(cy, cx, copy_bytes, cudaMemcpyDeviceToDevice));
            CK(cudaEventRecord(e0)); for (int i = 0; i < 30; ++i) CK(cudaMemcpyAsync(cy, cx, copy_bytes, cudaMemcpyDeviceToDevice));
            CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
            ceil_gbs.push_back(2.0 * copy_bytes / (ms / 30 * 1e-3) / 1e9);
            for (size_t v = 0; v < vs.size(); ++v) {
                // As metaprep's gpu_prep_us: launches back to back, an event pair around each,
                // one sync at the end (the next launch is queued while this one runs).
                for (int i = 0; i < 3; ++i) vs[v].launch();
                const int n = 50;
                for (int i = 0; i < n; ++i) { CK(cudaEventRecord(eb[i])); vs[v].launch(); CK(cudaEventRecord(ee[i])); }
                CK(cudaEventSynchronize(ee[n - 1]));
                std::vector<float> t;
                for (int i = 0; i < n; ++i) { CK(cudaEventElapsedTime(&ms, eb[i], ee[i])); t.push_back(ms * 1e3f); }
                per[v].push_back(median(t));
            }
        }
        float ceil_med = median(ceil_gbs);
        printf("\n## bs %d, block %d: %.1f MB, ceiling %.0f GB/s (rounds %d: %.0f..%.0f)\n", P, c.N, c.bytes / 1e6, ceil_med, rounds,
               *std::min_element(ceil_gbs.begin(), ceil_gbs.end()), *std::max_element(ceil_gbs.begin(), ceil_gbs.end()));
        printf("| kernel | median us | min..max us | GB/s | of ceiling |\n|---|---:|---:|---:|---:|\n");
        for (size_t v = 0; v < vs.size(); ++v) {
            float m = median(per[v]), lo = *std::min_element(per[v].begin(), per[v].end()), hi = *std::max_element(per[v].begin(), per[v].end());
            double gbs = c.bytes / (m * 1e-6) / 1e9;
            printf("| %s | %.2f | %.2f..%.2f | %.0f | %.1f%% |\n", vs[v].name.c_str(), m, lo, hi, gbs, 100 * gbs / ceil_med);
        }
        fflush(stdout);
        for (auto p : d_oracle) if (p) cudaFree(p);
        cudaFree(d_cols); cudaFree(d_compact);
        for (int k = 0; k < 8; ++k) cudaFree(c.out[k]); cudaFree(c.seq); cudaFree(c.pool); cudaFree(c.r2t);
    }
    return 0;
}
