// Shared by every family. The Rust side prepends the constants (METAPREP_PAGE_SIZE,
// METAPREP_SWA_WINDOW, METAPREP_DSA_TOPK, METAPREP_SWA_ALIGN) so there is one source of truth.
//
// Conventions: every buffer is int32 and row-major; `padded_bs` rows exist, the first
// `live_bs` are real requests and the rest are batch padding, which gets fill values
// (0 for lengths and positions, -1 for SWA cells, nothing for page-table columns since a
// padded row has no live KV). `host_block`, when not null, is the `[block] * bs` list the
// eager-sync arm built on the host and copied up; device-only arms pass null and use the
// block size they were launched with.

typedef long long i64;

__device__ __forceinline__ int align_up(int x, int a) { return (x + a - 1) / a * a; }
__device__ __forceinline__ int ceil_div(int x, int a) { return (x + a - 1) / a; }

__device__ __forceinline__ int block_of(const int* host_block, int i, int block) {
    return host_block != nullptr ? host_block[i] : block;
}

// This block's share of one page-table row. A row is cut into spans of
// METAPREP_PAGE_COLS_PER_BLOCK columns; block y of the row takes spans y, y + gridDim.y, ...
// up to the row's `live_cols`. The host bounds gridDim.y so the grid stays near a few
// blocks per SM however wide the static width is: a 128k-wide table at bs 256 would
// otherwise launch 100k+ blocks that find nothing to write. Column c holds the page of
// token c * stride; no consumer reads past the live columns, so none are written (DESIGN.md).
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

// Fill a buffer with the poison the checker uses to find cells nobody wrote.
extern "C" __global__ void poison_i32(int* __restrict__ buf, i64 n, int value) {
    for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (i64)gridDim.x * blockDim.x) {
        buf[k] = value;
    }
}
