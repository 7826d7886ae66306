// dsa_decode: one row per request. cache_seqlens = L, cu_seqlens_k = exclusive cumsum with a
// leading 0, dsa_cache_seqlens = min(L, topk), page_table_1 row = the request's first L slots.

// Per-request lengths and the cumsum, by one block of blockDim.x (<= 1024) threads: each
// thread sums a contiguous chunk, the block scans the chunk sums, each chunk writes its part.
__device__ void dsa_decode_lengths_block(const DsaArgs& a) {
    __shared__ int chunk_sum[1024];
    const int n = a.padded_bs, tid = threadIdx.x;
    const int per = ceil_div(n, blockDim.x);
    const int begin = min(tid * per, n), end = min(begin + per, n);
    int sum = 0;
    for (int i = begin; i < end; ++i) {
        const int L = dsa_seq_len(a, i);
        a.cache_seqlens[i] = L;
        a.dsa_cache_seqlens[i] = min(L, METAPREP_DSA_TOPK);
        sum += L;
    }
    chunk_sum[tid] = sum;
    __syncthreads();
    for (int offset = 1; offset < blockDim.x; offset <<= 1) {
        const int add = tid >= offset ? chunk_sum[tid - offset] : 0;
        __syncthreads();
        chunk_sum[tid] += add;
        __syncthreads();
    }
    int running = tid == 0 ? 0 : chunk_sum[tid - 1];
    if (tid == 0) a.cu_seqlens_k[0] = 0;
    for (int i = begin; i < end; ++i) {
        running += dsa_seq_len(a, i);
        a.cu_seqlens_k[i + 1] = running;
    }
}

extern "C" __global__ void dsa_decode_lengths(DsaArgs a) { dsa_decode_lengths_block(a); }

extern "C" __global__ void dsa_decode_page_table(DsaArgs a, int col_limit) {
    dsa_page_row(a, blockIdx.x, dsa_seq_len(a, blockIdx.x), col_limit);
}

// grid (padded_bs + 1, static column spans): the extra row of blocks' first block does the
// lengths and the cumsum, the others the page table.
extern "C" __global__ void dsa_decode_fused(DsaArgs a) {
    const int row = blockIdx.x;
    if (row == a.padded_bs) {
        if (blockIdx.y == 0) dsa_decode_lengths_block(a);
        return;
    }
    dsa_page_row(a, row, dsa_seq_len(a, row), a.page_width);
}
