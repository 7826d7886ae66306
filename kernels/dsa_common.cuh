// Shared by the three DSA families: one argument block, rows of `tokens` per request
// (1 for decode, N draft tokens for verify and draft-extend), token-level page_table_1 and
// its page-size-64 view real_page_table. What is written follows SGLang 0.5.23's DSA backend
// (python/sglang/srt/layers/attention/dsa_backend.py) and its fused metadata kernels
// (python/sglang/kernels/ops/attention/dsa/metadata.py).

struct DsaArgs {
    const int* seq_lens; const int* req_pool_indices; const int* req_to_token;
    const int* host_block;
    int* cache_seqlens;      // [P]: L, or L + N for verify
    int* cu_seqlens_q;       // [rows + 1]: arange
    int* cu_seqlens_k;       // [P + 1]: cumsum of cache_seqlens with a leading 0
    int* seqlens_expanded;   // [rows], verify and draft-extend only (null for decode)
    int* dsa_cache_seqlens;  // [rows]: min(row length, topk)
    int* dsa_cu_seqlens_k;   // [rows + 1]: cumsum of dsa_cache_seqlens with a leading 0
    int* page_table_1;       // [rows, page_width]
    int* real_page_table;    // [rows, real_width]
    int* eager_cols;         // [1] or null: the eager column count, left by the lengths stage
    int padded_bs; int tokens; int req_stride; int page_width; int real_width;
};

// Each family file defines these two: request i's KV length (cache_seqlens) and query row
// `row`'s visible length (seqlens_expanded).
__device__ int dsa_request_kv(const DsaArgs& a, int i);
__device__ int dsa_row_len(const DsaArgs& a, int row);

// The page-table stage's `col_limit`: a column count (eager-sync, from its host read), or
// METAPREP_DSA_COLS_FROM_DEVICE (eager-device: the max the lengths stage left in eager_cols)
// or METAPREP_DSA_COLS_BY_BLOCK (graph replay: each row in whole 128-column blocks), both
// defined from src/gpu/kernels.rs.

__device__ __forceinline__ int dsa_topk_len(const DsaArgs& a, int row) {
    return min(dsa_row_len(a, row), METAPREP_DSA_TOPK);
}

// Row `row`'s own length outputs (the scans aside).
__device__ __forceinline__ void dsa_row_outputs(const DsaArgs& a, int row) {
    const int len = dsa_row_len(a, row);
    if (a.seqlens_expanded != nullptr) store_kept(a.seqlens_expanded + row, len);
    store_kept(a.dsa_cache_seqlens + row, min(len, METAPREP_DSA_TOPK));
    store_kept(a.cu_seqlens_q + row, row);
}

// The two scans, cu_seqlens_k over requests and dsa_cu_seqlens_k over rows, by one whole
// block: each thread takes a contiguous chunk of requests, sums their KV lengths and their
// rows' top-k lengths (independent loads), one warp-shuffle scan per sum gives the chunk's
// start, and the thread writes its chunk's prefixes.
__device__ void dsa_scans_block(const DsaArgs& a) {
    const int P = a.padded_bs, N = a.tokens;
    const int per = ceil_div(P, blockDim.x);
    const int begin = min((int)threadIdx.x * per, P), end = min(begin + per, P);
    unsigned kv = 0, topk = 0;
    for (int i = begin; i < end; ++i) {
        kv += (unsigned)dsa_request_kv(a, i);
        for (int row = i * N; row < (i + 1) * N; ++row) topk += (unsigned)dsa_topk_len(a, row);
    }
    unsigned kv_run = block_exclusive_sum(kv);
    unsigned topk_run = block_exclusive_sum(topk);
    if (threadIdx.x == 0) {
        store_kept(a.cu_seqlens_k, 0);
        store_kept(a.dsa_cu_seqlens_k, 0);
    }
    for (int i = begin; i < end; ++i) {
        kv_run += (unsigned)dsa_request_kv(a, i);
        store_kept(a.cu_seqlens_k + i + 1, (int)kv_run);
        for (int row = i * N; row < (i + 1) * N; ++row) {
            topk_run += (unsigned)dsa_topk_len(a, row);
            store_kept(a.dsa_cu_seqlens_k + row + 1, (int)topk_run);
        }
    }
}

// Every length output, by one whole block (blockDim.x <= 1024, a multiple of 32).
__device__ void dsa_lengths_block(const DsaArgs& a) {
    const int P = a.padded_bs, rows = P * a.tokens;
    for (int i = threadIdx.x; i < P; i += blockDim.x) store_kept(a.cache_seqlens + i, dsa_request_kv(a, i));
    for (int r = threadIdx.x; r < rows; r += blockDim.x) dsa_row_outputs(a, r);
    if (threadIdx.x == 0) store_kept(a.cu_seqlens_q + rows, rows);
    dsa_scans_block(a);
    if (a.eager_cols != nullptr) {
        // The eager path's max_seqlen_k, found on the device instead of by a host read.
        const int longest = block_max(P, [&](int i) { return dsa_request_kv(a, i); });
        if (threadIdx.x == 0) a.eager_cols[0] = longest;
    }
}

// Request i's written columns of page_table_1 under `col_limit`.
__device__ __forceinline__ int dsa_page_cols(const DsaArgs& a, int i, int col_limit) {
    int cols = col_limit;
    if (col_limit == METAPREP_DSA_COLS_BY_BLOCK) {
        cols = align_up(max(dsa_request_kv(a, i), 0), METAPREP_DSA_GRAPH_COL_BLOCK);
    } else if (col_limit == METAPREP_DSA_COLS_FROM_DEVICE) {
        cols = a.eager_cols[0];
    }
    return min(cols, a.page_width);
}

// This block's share of page rows row .. row + copies - 1 (rows of one request, alike) in
// both tables: page_table_1 holds the request's token slots, real_page_table every 64th of
// them divided by 64, taken from the values the copy has loaded anyway.
__device__ __forceinline__ void dsa_page_rows(const DsaArgs& a, int row, int copies,
                                              int col_limit) {
    const int i = row / a.tokens;
    int* real = a.real_page_table + (i64)row * a.real_width;
    page_rows_span(a.page_table_1, a.page_width, row, copies, dsa_page_cols(a, i, col_limit), 1,
                   a.req_to_token, a.req_stride, a.req_pool_indices[i], [&](int c, int value) {
                       if (c % METAPREP_DSA_REAL_PAGE_SIZE != 0) return;
                       for (int r = 0; r < copies; ++r) {
                           store_kept(real + (i64)r * a.real_width + c / METAPREP_DSA_REAL_PAGE_SIZE,
                                      value / METAPREP_DSA_REAL_PAGE_SIZE);
                       }
                   });
}

extern "C" __global__ void dsa_lengths(DsaArgs a) { dsa_lengths_block(a); }

// grid (rows, column spans).
extern "C" __global__ void dsa_page_table(DsaArgs a, int col_limit) {
    dsa_page_rows(a, blockIdx.x, 1, col_limit);
}

// Every output in one launch, as graph replay writes it: grid (requests + 1, column spans).
// Block (0, 0) does the scans; it comes first so that at large batch it starts with the
// first wave instead of after every page block. Block (i + 1, y) copies its spans of
// request i's page columns into all of the request's rows (loaded once, stored `tokens`
// times); blocks (i + 1, 0) then write the request's own lengths (after the copy: a store
// may alias a later load, so loads issued after a store wait for it).
extern "C" __global__ void dsa_fused(DsaArgs a) {
    const int N = a.tokens;
    if (blockIdx.x == 0) {
        if (blockIdx.y != 0) return;
        dsa_scans_block(a);
        if (threadIdx.x == 0) store_kept(a.cu_seqlens_q + a.padded_bs * N, a.padded_bs * N);
        return;
    }
    const int i = blockIdx.x - 1;
    dsa_page_rows(a, i * N, N, METAPREP_DSA_COLS_BY_BLOCK);
    if (blockIdx.y == 0) {
        if (threadIdx.x == 0) store_kept(a.cache_seqlens + i, dsa_request_kv(a, i));
        for (int j = threadIdx.x; j < N; j += blockDim.x) dsa_row_outputs(a, i * N + j);
    }
}
