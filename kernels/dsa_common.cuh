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
    int bs;                  // requests computed (rows: bs * tokens); see common.cuh
    int tokens; int req_stride; int page_width; int real_width;
};

// Each family file defines these two from request i's committed length `len` (seq_lens[i]):
// its KV length (cache_seqlens) and the visible length of its row j (seqlens_expanded).
__device__ int dsa_kv_of(const DsaArgs& a, int i, int len);
__device__ int dsa_row_len_of(const DsaArgs& a, int i, int len, int j);

__device__ __forceinline__ int dsa_request_kv(const DsaArgs& a, int i) {
    return dsa_kv_of(a, i, a.seq_lens[i]);
}

__device__ __forceinline__ int dsa_row_len(const DsaArgs& a, int row) {
    const int i = row / a.tokens;
    return dsa_row_len_of(a, i, a.seq_lens[i], row % a.tokens);
}

// What sparse attention reads of a row that sees `row_len`: at most the top-k.
__device__ __forceinline__ int dsa_topk_len(int row_len) { return min(row_len, METAPREP_DSA_TOPK); }

// The page-table stage's `col_limit`: a column count (eager-sync, from its host read), or
// METAPREP_DSA_COLS_FROM_DEVICE (eager-device: the max the lengths stage left in eager_cols)
// or METAPREP_DSA_COLS_BY_BLOCK (graph replay: each row in whole 128-column blocks), both
// defined from src/gpu/kernels.rs.

// Row `row`'s own length outputs (the scans aside).
__device__ __forceinline__ void dsa_row_outputs(const DsaArgs& a, int row) {
    const int len = dsa_row_len(a, row);
    if (a.seqlens_expanded != nullptr) store_kept(a.seqlens_expanded + row, len);
    store_kept(a.dsa_cache_seqlens + row, dsa_topk_len(len));
    store_kept(a.cu_seqlens_q + row, row);
}

// The two scans, cu_seqlens_k over requests and dsa_cu_seqlens_k over rows, by one whole
// block: each thread takes a contiguous chunk of requests, sums their KV lengths and their
// rows' top-k lengths, one warp-shuffle scan of both sums gives the chunk's starts, and the
// thread writes its chunk's prefixes. A request's length is loaded once a pass and its rows'
// lengths computed from it: loaded again for each row, every row of the writing pass would
// wait out a load, since no load may move above a store to an output it might alias.
__device__ void dsa_scans_block(const DsaArgs& a) {
    const int P = a.bs, N = a.tokens;
    const int per = ceil_div(P, blockDim.x);
    const int begin = min((int)threadIdx.x * per, P), end = min(begin + per, P);
    uint2 sums = make_uint2(0, 0);  // (kv, top-k)
    for (int i = begin; i < end; ++i) {
        const int len = a.seq_lens[i];
        sums.x += (unsigned)dsa_kv_of(a, i, len);
        for (int j = 0; j < N; ++j) {
            sums.y += (unsigned)dsa_topk_len(dsa_row_len_of(a, i, len, j));
        }
    }
    uint2 run = block_exclusive_sums(sums);
    if (threadIdx.x == 0) {
        store_kept(a.cu_seqlens_k, 0);
        store_kept(a.dsa_cu_seqlens_k, 0);
    }
    for (int i = begin; i < end; ++i) {
        const int len = a.seq_lens[i];
        run.x += (unsigned)dsa_kv_of(a, i, len);
        store_kept(a.cu_seqlens_k + i + 1, (int)run.x);
        for (int j = 0; j < N; ++j) {
            run.y += (unsigned)dsa_topk_len(dsa_row_len_of(a, i, len, j));
            store_kept(a.dsa_cu_seqlens_k + i * N + j + 1, (int)run.y);
        }
    }
}

// Every length output, by one whole block (blockDim.x <= 1024, a multiple of 32).
__device__ void dsa_lengths_block(const DsaArgs& a) {
    const int P = a.bs, rows = P * a.tokens;
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
        if (threadIdx.x == 0) store_kept(a.cu_seqlens_q + a.bs * N, a.bs * N);
        return;
    }
    const int i = blockIdx.x - 1;
    dsa_page_rows(a, i * N, N, METAPREP_DSA_COLS_BY_BLOCK);
    if (blockIdx.y == 0) {
        if (threadIdx.x == 0) store_kept(a.cache_seqlens + i, dsa_request_kv(a, i));
        for (int j = threadIdx.x; j < N; j += blockDim.x) dsa_row_outputs(a, i * N + j);
    }
}
