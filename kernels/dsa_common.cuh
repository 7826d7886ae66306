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

// Every length output, by one whole block (blockDim.x <= 1024).
__device__ void dsa_lengths_block(const DsaArgs& a) {
    const int P = a.padded_bs, rows = P * a.tokens;
    for (int i = threadIdx.x; i < P; i += blockDim.x) a.cache_seqlens[i] = dsa_request_kv(a, i);
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        const int len = dsa_row_len(a, r);
        if (a.seqlens_expanded != nullptr) a.seqlens_expanded[r] = len;
        a.dsa_cache_seqlens[r] = min(len, METAPREP_DSA_TOPK);
    }
    for (int q = threadIdx.x; q <= rows; q += blockDim.x) a.cu_seqlens_q[q] = q;
    block_cumsum(P, [&](int i) { return dsa_request_kv(a, i); }, a.cu_seqlens_k);
    block_cumsum(rows, [&](int r) { return min(dsa_row_len(a, r), METAPREP_DSA_TOPK); },
                 a.dsa_cu_seqlens_k);
    if (a.eager_cols != nullptr) {
        // The eager path's max_seqlen_k, found on the device instead of by a host read.
        const int longest = block_max(P, [&](int i) { return dsa_request_kv(a, i); });
        if (threadIdx.x == 0) a.eager_cols[0] = longest;
    }
}

// Page row `row`'s written columns of page_table_1 under `col_limit`.
__device__ __forceinline__ int dsa_page_cols(const DsaArgs& a, int row, int col_limit) {
    int cols = col_limit;
    if (col_limit == METAPREP_DSA_COLS_BY_BLOCK) {
        cols = align_up(max(dsa_request_kv(a, row / a.tokens), 0), METAPREP_DSA_GRAPH_COL_BLOCK);
    } else if (col_limit == METAPREP_DSA_COLS_FROM_DEVICE) {
        cols = a.eager_cols[0];
    }
    return min(cols, a.page_width);
}

// This block's share of page row `row` in both tables: page_table_1 holds the request's
// token slots, real_page_table every 64th of them divided by 64.
__device__ __forceinline__ void dsa_page_row(const DsaArgs& a, int row, int col_limit) {
    const int cols = dsa_page_cols(a, row, col_limit);
    const int pool = a.req_pool_indices[row / a.tokens];
    page_row_span(a.page_table_1, a.page_width, row, cols, 1, a.req_to_token, a.req_stride,
                  pool);
    page_row_span(a.real_page_table, a.real_width, row,
                  ceil_div(cols, METAPREP_DSA_REAL_PAGE_SIZE), METAPREP_DSA_REAL_PAGE_SIZE,
                  a.req_to_token, a.req_stride, pool);
}

extern "C" __global__ void dsa_lengths(DsaArgs a) { dsa_lengths_block(a); }

// grid (rows, column spans).
extern "C" __global__ void dsa_page_table(DsaArgs a, int col_limit) {
    dsa_page_row(a, blockIdx.x, col_limit);
}

// Every output in one launch, as graph replay writes it: grid (rows + 1, column spans); the
// extra row of blocks' first block does the lengths and the scans, the others the tables.
extern "C" __global__ void dsa_fused(DsaArgs a) {
    const int row = blockIdx.x;
    if (row == a.padded_bs * a.tokens) {
        if (blockIdx.y == 0) dsa_lengths_block(a);
        return;
    }
    dsa_page_row(a, row, METAPREP_DSA_COLS_BY_BLOCK);
}
