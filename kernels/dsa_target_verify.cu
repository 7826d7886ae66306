// dsa_target_verify: N = tokens draft tokens per request verified by the target.
// cache_seqlens = L + N; row (i, j) sees L + j + 1; every page row of the request covers
// kv = L + N. The kernels are in dsa_common.cuh.

__device__ int dsa_request_kv(const DsaArgs& a, int i) {
    return a.seq_lens[i] + block_of(a.host_block, i, a.tokens);
}

__device__ int dsa_row_len(const DsaArgs& a, int row) {
    return a.seq_lens[row / a.tokens] + row % a.tokens + 1;
}
