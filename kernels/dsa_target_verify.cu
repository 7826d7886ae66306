// dsa_target_verify: N = tokens draft tokens per request verified by the target.
// cache_seqlens = L + N; row (i, j): seqlens_expanded = L + j + 1, dsa_cache_seqlens =
// min(that, topk); page rows are the request's row repeated N times, live up to the
// row's causal length.

__device__ __forceinline__ int verify_row_len(const DsaArgs& a, int row) {
    const int i = row / a.tokens, j = row % a.tokens;
    return i < a.live_bs ? a.seq_lens[i] + j + 1 : 0;
}

__device__ __forceinline__ void verify_lengths_at(const DsaArgs& a, int row) {
    const int i = row / a.tokens, j = row % a.tokens;
    const int expanded = verify_row_len(a, row);
    if (j == 0) {
        a.cache_seqlens[i] =
            i < a.live_bs ? a.seq_lens[i] + block_of(a.host_block, i, a.tokens) : 0;
    }
    a.seqlens_expanded[row] = expanded;
    a.dsa_cache_seqlens[row] = min(expanded, METAPREP_DSA_TOPK);
}

extern "C" __global__ void dsa_target_verify_lengths(DsaArgs a) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < a.padded_bs * a.tokens) verify_lengths_at(a, row);
}

extern "C" __global__ void dsa_target_verify_page_table(DsaArgs a, int col_limit) {
    dsa_page_row(a, blockIdx.x, verify_row_len(a, blockIdx.x), col_limit);
}

extern "C" __global__ void dsa_target_verify_fused(DsaArgs a) {
    const int row = blockIdx.x;
    dsa_page_row(a, row, verify_row_len(a, row), a.page_width);
    if (blockIdx.y == 0 && threadIdx.x == 0) verify_lengths_at(a, row);
}
