// dsa_draft_extend_v2: the draft model extends over N = tokens tokens whose KV is already
// committed. cache_seqlens = L; row (i, j) sees max(L - N + j + 1, 0) (the engine clamps
// padding rows, whose L = 1 is below N); page rows cover kv = L. The kernels are in
// dsa_common.cuh.

__device__ int dsa_request_kv(const DsaArgs& a, int i) { return a.seq_lens[i]; }

__device__ int dsa_row_len(const DsaArgs& a, int row) {
    const int i = row / a.tokens, j = row % a.tokens;
    return max(a.seq_lens[i] - block_of(a.host_block, i, a.tokens) + j + 1, 0);
}
