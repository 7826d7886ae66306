// dsa_decode: one row per request. cache_seqlens = L, its one row sees L; the kernels
// (lengths, page table, fused) are in dsa_common.cuh.

__device__ int dsa_kv_of(const DsaArgs&, int, int len) { return len; }

__device__ int dsa_row_len_of(const DsaArgs&, int, int len, int) { return len; }
