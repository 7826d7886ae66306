// Shared by every family. The Rust side prepends the constants (METAPREP_PAGE_SIZE,
// METAPREP_SWA_WINDOW, METAPREP_DSA_TOPK, METAPREP_SWA_ALIGN, ...) so there is one source of
// truth.
//
// Conventions: every buffer is int32 and row-major; `padded_bs` rows exist and every one is
// computed alike: padding rows hold the engine's fill values (sequence length 1, pool row 0,
// KV slot 0), as SGLang's graph runner fills them. `host_block`, when not null, is the
// `[block] * bs` list the eager-sync arm built on the host and copied up; device-only arms
// pass null and use the block size they were launched with.

typedef long long i64;

__device__ __forceinline__ int align_up(int x, int a) { return (x + a - 1) / a * a; }
__device__ __forceinline__ int ceil_div(int x, int a) { return (x + a - 1) / a; }

__device__ __forceinline__ int block_of(const int* host_block, int i, int block) {
    return host_block != nullptr ? host_block[i] : block;
}

// This block's share of one page-table row. A row is cut into spans of
// METAPREP_PAGE_COLS_PER_BLOCK columns; block y of the row takes spans y, y + gridDim.y, ...
// up to the row's `live_cols`. The host bounds gridDim.y so the grid stays near a few
// blocks per SM however wide the static width is. Column c holds token c * stride's slot
// divided by stride (its page).
__device__ __forceinline__ void page_row_span(int* __restrict__ out, int out_width, int row,
                                              int live_cols, int stride,
                                              const int* __restrict__ req_to_token,
                                              int req_stride, int pool_index) {
    const int* src = req_to_token + (i64)pool_index * req_stride;
    int* dst = out + (i64)row * out_width;
    for (int begin = blockIdx.y * METAPREP_PAGE_COLS_PER_BLOCK; begin < live_cols;
         begin += gridDim.y * METAPREP_PAGE_COLS_PER_BLOCK) {
        const int end = min(live_cols, begin + METAPREP_PAGE_COLS_PER_BLOCK);
        for (int c = begin + threadIdx.x; c < end; c += blockDim.x) {
            dst[c] = src[(i64)c * stride] / stride;
        }
    }
}

// `out[0] = 0, out[k + 1] = value(0) + ... + value(k)` for k < n, by one whole block of
// blockDim.x (<= 1024) threads: each thread sums a contiguous chunk, the block scans the
// chunk sums, each chunk writes its part. Sums wrap like the engine's int32 cumsum.
template <class Value>
__device__ void block_cumsum(int n, Value value, int* __restrict__ out) {
    __shared__ unsigned chunk_sum[1024];
    const int tid = threadIdx.x;
    const int per = ceil_div(n, blockDim.x);
    const int begin = min(tid * per, n), end = min(begin + per, n);
    unsigned sum = 0;
    for (int k = begin; k < end; ++k) sum += (unsigned)value(k);
    chunk_sum[tid] = sum;
    __syncthreads();
    for (int offset = 1; offset < blockDim.x; offset <<= 1) {
        const unsigned add = tid >= offset ? chunk_sum[tid - offset] : 0u;
        __syncthreads();
        chunk_sum[tid] += add;
        __syncthreads();
    }
    unsigned running = tid == 0 ? 0u : chunk_sum[tid - 1];
    if (tid == 0) out[0] = 0;
    for (int k = begin; k < end; ++k) {
        running += (unsigned)value(k);
        out[k + 1] = (int)running;
    }
    __syncthreads();  // chunk_sum is reused by the next scan
}

// max(0, value(0), ..., value(n - 1)), by one whole block; every thread gets it.
template <class Value>
__device__ int block_max(int n, Value value) {
    __shared__ int best;
    if (threadIdx.x == 0) best = 0;
    __syncthreads();
    int mine = 0;
    for (int k = threadIdx.x; k < n; k += blockDim.x) mine = max(mine, value(k));
    atomicMax(&best, mine);
    __syncthreads();
    const int result = best;
    __syncthreads();
    return result;
}

// Fill a buffer with the poison the checker uses to find cells nobody wrote.
extern "C" __global__ void poison_i32(int* __restrict__ buf, i64 n, int value) {
    for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (i64)gridDim.x * blockDim.x) {
        buf[k] = value;
    }
}
