// dsa_target_verify: N = tokens draft tokens per request verified by the target.
// cache_seqlens = L + N; row (i, j) sees L + j + 1; every page row of the request covers
// kv = L + N. The kernels are in dsa_common.cuh.

__device__ int dsa_kv_of(const DsaArgs& a, int i, int len) {
    return len + block_of(a.host_block, i, a.tokens);
}

__device__ int dsa_row_len_of(const DsaArgs&, int, int len, int j) { return len + j + 1; }
