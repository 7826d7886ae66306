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
    int padded_bs; int block; int req_stride; int page_width; int swa_width;
};

// The window's length: the last min(L, W) tokens, none below the pool row's valid_from.
__device__ __forceinline__ int dspark_context_len(const DsparkArgs& a, int i, int L) {
    const int valid_from = a.swa_valid_from[a.req_pool_indices[i]];
    return min(min(L, METAPREP_SWA_WINDOW), max(L - valid_from, 0));
}

// Per-token lengths (and per-request ones from the token j == 0).
__device__ __forceinline__ void dspark_lengths_at(const DsparkArgs& a, int t) {
    const int i = t / a.block, j = t % a.block;
    const int L = a.seq_lens[i];
    const int g = block_of(a.host_block, i, a.block);
    if (j == 0) {
        a.extend_seq_lens[i] = g;
        a.seq_lens_extended[i] = L + g;
    }
    a.seq_lens_causal[t] = L + 1 + j;
    a.positions[t] = L + j;
    // Attention inside a block is non-causal: every row sees the window plus the whole block.
    a.swa_topk_lengths[t] = dspark_context_len(a, i, L) + g;
}

// One SWA cell: the window's tokens, then the block's new tokens, then -1.
__device__ __forceinline__ void dspark_swa_at(const DsparkArgs& a, int t, int k) {
    const int i = t / a.block;
    const int L = a.seq_lens[i];
    const int cl = dspark_context_len(a, i, L);
    const int g = block_of(a.host_block, i, a.block);
    int value = -1;
    if (k < cl) {
        const int slot = a.req_to_token[(i64)a.req_pool_indices[i] * a.req_stride + L - cl + k];
        value = a.full_to_swa[slot];
    } else if (k < cl + g) {
        value = a.full_to_swa[a.out_cache_loc[i * a.block + k - cl]];
    }
    a.swa_page_indices[(i64)t * a.swa_width + k] = value;
}

// Row t's page table: the one-page placeholder (`req_to_token[rp, :256:256] // 256`).
__device__ __forceinline__ void dspark_page_row(const DsparkArgs& a, int t, int col_limit) {
    page_row_span(a.page_table, a.page_width, t, min(a.page_width, col_limit), METAPREP_PAGE_SIZE,
                  a.req_to_token, a.req_stride, a.req_pool_indices[t / a.block]);
}

extern "C" __global__ void dspark_draft_block_lengths(DsparkArgs a) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < a.padded_bs * a.block) dspark_lengths_at(a, t);
}

// grid (rows, column spans); `col_limit` bounds the columns (the static one-page width in
// every arm: the engine sizes this table by the page size, not by a host-read length).
extern "C" __global__ void dspark_draft_block_page_table(DsparkArgs a, int col_limit) {
    dspark_page_row(a, blockIdx.x, col_limit);
}

// grid (rows); threads stride over the row's SWA columns.
extern "C" __global__ void dspark_draft_block_swa(DsparkArgs a) {
    for (int k = threadIdx.x; k < a.swa_width; k += blockDim.x) dspark_swa_at(a, blockIdx.x, k);
}

// Every output in one launch: grid (rows, static column spans); the first span of each row
// also writes the row's lengths and SWA cells.
extern "C" __global__ void dspark_draft_block_fused(DsparkArgs a) {
    const int t = blockIdx.x;
    dspark_page_row(a, t, a.page_width);
    if (blockIdx.y == 0) {
        if (threadIdx.x == 0) dspark_lengths_at(a, t);
        for (int k = threadIdx.x; k < a.swa_width; k += blockDim.x) dspark_swa_at(a, t, k);
    }
}
