// dspark_draft_block: metadata for a DSpark block drafter's forward over a block of
// `block` (gamma) draft tokens per request. Token t = i * block + j. As SGLang 0.5.23's CUDA
// DeepSeek-V4 backend writes it (init_forward_metadata_dspark_draft_block in
// python/sglang/srt/layers/attention/deepseek_v4_backend.py, the window gather and SWA
// indices in python/sglang/kernels/ops/speculative/dspark/dspark_attn_metadata.py).
//
// Outputs: extend_seq_lens[P], seq_lens_extended[P], seq_lens_causal[P*block],
// positions[P*block], swa_topk_lengths[P*block], page_table[P*block, page_width = 1],
// swa_page_indices[P*block, swa_width].

struct DsparkArgs {
    const int* seq_lens; const int* req_pool_indices; const int* req_to_token;
    const int* out_cache_loc; const int* full_to_swa; const int* swa_valid_from;
    const int* host_block;
    int* extend_seq_lens; int* seq_lens_extended; int* seq_lens_causal; int* positions;
    int* swa_topk_lengths; int* page_table; int* swa_page_indices;
    int bs;  // requests computed (rows: bs * block); see common.cuh
    int block; int req_stride; int page_width; int swa_width;
};

// The window's length: the last min(L, W) tokens, none below the pool row's valid_from.
__device__ __forceinline__ int dspark_context_len(const DsparkArgs& a, int pool, int L) {
    return min(min(L, METAPREP_SWA_WINDOW), max(L - a.swa_valid_from[pool], 0));
}

// Token t's lengths, from its request's L, window length cl and block g (and the request's
// own from the token j == 0).
__device__ __forceinline__ void dspark_write_lengths(const DsparkArgs& a, int t, int L, int cl,
                                                     int g) {
    const int i = t / a.block, j = t % a.block;
    if (j == 0) {
        a.extend_seq_lens[i] = g;
        a.seq_lens_extended[i] = L + g;
    }
    a.seq_lens_causal[t] = L + 1 + j;
    a.positions[t] = L + j;
    // Attention inside a block is non-causal: every row sees the window plus the whole block.
    a.swa_topk_lengths[t] = cl + g;
}

// Request i's SWA cell k, alike in every row of the request: the window's tokens, then the
// block's new tokens, then -1. The slot is loaded at the offset it has when valid_from does
// not cut the window (the common case) while valid_from itself loads, so a cell waits for
// two dependent loads after L and the pool row, not three; a cut window loads it again.
__device__ __forceinline__ int dspark_swa_value(const DsparkArgs& a, int i, int L, int pool,
                                                int g, int k) {
    const i64 row = (i64)pool * a.req_stride;
    const int uncut = min(L, METAPREP_SWA_WINDOW);
    int slot = 0;
    if (k < uncut) {
        slot = a.req_to_token[row + L - uncut + k];
    } else if (k < uncut + g) {
        slot = a.out_cache_loc[i * a.block + k - uncut];
    }
    const int cl = dspark_context_len(a, pool, L);
    if (k >= cl + g) return -1;
    if (cl != uncut) {
        slot = k < cl ? a.req_to_token[row + L - cl + k] : a.out_cache_loc[i * a.block + k - cl];
    }
    return a.full_to_swa[slot];
}

// This block's share of rows t .. t + copies - 1's page table (rows of one request, alike):
// the one-page placeholder (`req_to_token[rp, :256:256] // 256`).
__device__ __forceinline__ void dspark_page_rows(const DsparkArgs& a, int t, int copies,
                                                 int col_limit) {
    page_rows_span(a.page_table, a.page_width, t, copies, min(a.page_width, col_limit),
                   METAPREP_PAGE_SIZE, a.req_to_token, a.req_stride,
                   a.req_pool_indices[t / a.block], [](int, int) {});
}

extern "C" __global__ void dspark_draft_block_lengths(DsparkArgs a) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= a.bs * a.block) return;
    const int i = t / a.block;
    const int L = a.seq_lens[i];
    dspark_write_lengths(a, t, L, dspark_context_len(a, a.req_pool_indices[i], L),
                         block_of(a.host_block, i, a.block));
}

// grid (rows, column spans); `col_limit` bounds the columns (the static one-page width in
// every arm: the engine sizes this table by the page size, not by a host-read length).
extern "C" __global__ void dspark_draft_block_page_table(DsparkArgs a, int col_limit) {
    dspark_page_rows(a, blockIdx.x, 1, col_limit);
}

// grid (rows); threads stride over the row's SWA columns.
extern "C" __global__ void dspark_draft_block_swa(DsparkArgs a) {
    const int t = blockIdx.x, i = t / a.block;
    const int L = a.seq_lens[i], pool = a.req_pool_indices[i];
    const int g = block_of(a.host_block, i, a.block);
    for (int k = threadIdx.x; k < a.swa_width; k += blockDim.x) {
        a.swa_page_indices[(i64)t * a.swa_width + k] = dspark_swa_value(a, i, L, pool, g, k);
    }
}

// Every output in one launch: grid (requests). Block i loads request i's inputs once and
// stores them into all of its rows: its SWA cells, its lengths and its one-page page table
// (DSpark's page table is one column wide, Shape::page_width). Everything is loaded before
// the first store: a store may alias a later load, so a load issued after it waits for it.
extern "C" __global__ void dspark_draft_block_fused(DsparkArgs a) {
    const int i = blockIdx.x, B = a.block;
    const int L = a.seq_lens[i], pool = a.req_pool_indices[i];
    const int g = block_of(a.host_block, i, B);
    const int cl = dspark_context_len(a, pool, L);
    const int page =
        threadIdx.x < B ? a.req_to_token[(i64)pool * a.req_stride] / METAPREP_PAGE_SIZE : 0;
    for (int k = threadIdx.x; k < a.swa_width; k += blockDim.x) {
        const int value = dspark_swa_value(a, i, L, pool, g, k);
        for (int j = 0; j < B; ++j) a.swa_page_indices[(i64)(i * B + j) * a.swa_width + k] = value;
    }
    for (int j = threadIdx.x; j < B; j += blockDim.x) {
        dspark_write_lengths(a, i * B + j, L, cl, g);
        a.page_table[(i64)(i * B + j) * a.page_width] = page;
    }
}
