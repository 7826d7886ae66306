// dsa_draft_extend_v2: the draft model extends over N = tokens tokens whose KV is already
// committed. cache_seqlens = L; row (i, j) sees max(L - N + j + 1, 0) (the engine clamps
// padding rows, whose L = 1 is below N); page rows cover kv = L. The kernels are in
// dsa_common.cuh.

__device__ int dsa_kv_of(const DsaArgs&, int, int len) { return len; }

__device__ int dsa_row_len_of(const DsaArgs& a, int i, int len, int j) {
    return max(len - block_of(a.host_block, i, a.tokens) + j + 1, 0);
}
