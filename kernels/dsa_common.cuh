// Shared by the three DSA families: one argument block, rows of `tokens` per request
// (1 for decode, N draft tokens for verify and draft-extend), token-level page table.

struct DsaArgs {
    const int* seq_lens; const int* req_pool_indices; const int* req_to_token;
    const int* host_block;
    int* cache_seqlens;      // [P]
    int* cu_seqlens_k;       // [P + 1], decode only (null otherwise)
    int* seqlens_expanded;   // [P * tokens], verify and draft-extend only (null otherwise)
    int* dsa_cache_seqlens;  // [P * tokens]
    int* page_table_1;       // [P * tokens, page_width]
    int live_bs; int padded_bs; int tokens; int req_stride; int page_width;
};

__device__ __forceinline__ int dsa_seq_len(const DsaArgs& a, int i) {
    return i < a.live_bs ? a.seq_lens[i] : 0;
}

// Page row `row` of request row / tokens holds that request's first `kv_len` token slots,
// up to `col_limit` columns.
__device__ __forceinline__ void dsa_page_row(const DsaArgs& a, int row, int kv_len, int col_limit) {
    const int i = row / a.tokens;
    if (i >= a.live_bs) return;
    page_row_span(a.page_table_1, a.page_width, row, min(kv_len, col_limit), 1, a.req_to_token,
                  a.req_stride, a.req_pool_indices[i]);
}
