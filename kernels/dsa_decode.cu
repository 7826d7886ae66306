// dsa_decode: one row per request. cache_seqlens = L, its one row sees L; the kernels
// (lengths, page table, fused) are in dsa_common.cuh.

__device__ int dsa_request_kv(const DsaArgs& a, int i) { return a.seq_lens[i]; }

__device__ int dsa_row_len(const DsaArgs& a, int row) { return a.seq_lens[row]; }
