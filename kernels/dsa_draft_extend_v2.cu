// dsa_draft_extend_v2: the draft model extends over N = tokens tokens whose KV is already
// committed. cache_seqlens = L; row (i, j): seqlens_expanded = max(L - N + j + 1, 0),
// dsa_cache_seqlens = min(that, topk); page rows repeated N times, live up to seqlens_expanded.

__device__ __forceinline__ int extend_row_len(const DsaArgs& a, int row) {
    const int i = row / a.tokens, j = row % a.tokens;
    if (i >= a.live_bs) return 0;
    return max(a.seq_lens[i] - block_of(a.host_block, i, a.tokens) + j + 1, 0);
}

__device__ __forceinline__ void extend_lengths_at(const DsaArgs& a, int row) {
    const int i = row / a.tokens, j = row % a.tokens;
    const int expanded = extend_row_len(a, row);
    if (j == 0) a.cache_seqlens[i] = dsa_seq_len(a, i);
    a.seqlens_expanded[row] = expanded;
    a.dsa_cache_seqlens[row] = min(expanded, METAPREP_DSA_TOPK);
}

extern "C" __global__ void dsa_draft_extend_v2_lengths(DsaArgs a) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < a.padded_bs * a.tokens) extend_lengths_at(a, row);
}

extern "C" __global__ void dsa_draft_extend_v2_page_table(DsaArgs a, int col_limit) {
    dsa_page_row(a, blockIdx.x, extend_row_len(a, blockIdx.x), col_limit);
}

extern "C" __global__ void dsa_draft_extend_v2_fused(DsaArgs a) {
    const int row = blockIdx.x;
    dsa_page_row(a, row, extend_row_len(a, row), a.page_width);
    if (blockIdx.y == 0 && threadIdx.x == 0) extend_lengths_at(a, row);
}
