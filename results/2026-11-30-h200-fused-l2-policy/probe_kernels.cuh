// Kernels of the probe (probe_fused.cu), each a variant of the fused DSA kernel: the page-span
// walk (every block one contiguous share of all requests' spans, flattened request by request),
// HEAD with parts switched off, HEAD with cache hints. Included by probe_fused.cu after the
// family file; needs the kernels of 8bd23de with probe-kernels.patch applied.

// Spans of request i's graph page row.
__device__ __forceinline__ int dsa_graph_spans(const DsaArgs& a, int i) {
    return ceil_div(dsa_page_cols(a, i, METAPREP_DSA_COLS_BY_BLOCK), METAPREP_PAGE_COLS_PER_BLOCK);
}

// grid (1 + G): block 0 the scans; block 1 + b the spans [total*b/G, total*(b+1)/G) of the
// flattened list, then its grid-stride share of the per-request and per-row lengths.
// `oracle` (probe only): each block's first (request, span) and the total, from the host.
template <bool kOracle>
__device__ void dsa_fused_walk_body(const DsaArgs& a, const int* oracle) {
    const int N = a.tokens, P = a.padded_bs;
    if (blockIdx.x == 0) {
        dsa_scans_block(a);
        if (threadIdx.x == 0) a.cu_seqlens_q[P * N] = P * N;
        return;
    }
    const int G = gridDim.x - 1, b = blockIdx.x - 1;
    __shared__ unsigned total;
    __shared__ int first_request, first_span;
    if (kOracle) {
        if (threadIdx.x == 0) {
            total = oracle[0];
            first_request = oracle[1 + 2 * b];
            first_span = oracle[2 + 2 * b];
        }
        __syncthreads();
    } else {
        const int per = ceil_div(P, blockDim.x);
        const int begin = min((int)threadIdx.x * per, P), end = min(begin + per, P);
        unsigned mine = 0;
        for (int i = begin; i < end; ++i) mine += dsa_graph_spans(a, i);
        const unsigned before = block_exclusive_sum(mine);
        if (threadIdx.x == blockDim.x - 1) total = before + mine;
        __syncthreads();
        const unsigned lo = (unsigned)((unsigned long long)total * b / G);
        if (before <= lo && lo < before + mine) {
            unsigned at = before;
            int i = begin;
            for (;; ++i) {
                const unsigned n = dsa_graph_spans(a, i);
                if (lo < at + n) break;
                at += n;
            }
            first_request = i;
            first_span = lo - at;
        }
        __syncthreads();
    }
    const unsigned lo = (unsigned)((unsigned long long)total * b / G);
    const unsigned hi = (unsigned)((unsigned long long)total * (b + 1) / G);
    if (lo < hi) {
        int i = first_request, s = first_span;
        for (unsigned k = lo; k < hi; ++i, s = 0) {
            const int cols = dsa_page_cols(a, i, METAPREP_DSA_COLS_BY_BLOCK);
            const int take = min(ceil_div(cols, METAPREP_PAGE_COLS_PER_BLOCK) - s, (int)(hi - k));
            dsa_page_rows(a, i * N, N, s * METAPREP_PAGE_COLS_PER_BLOCK,
                          METAPREP_PAGE_COLS_PER_BLOCK,
                          min(cols, (s + take) * METAPREP_PAGE_COLS_PER_BLOCK));
            k += take;
        }
    }
    for (int i = b * blockDim.x + threadIdx.x; i < P; i += G * blockDim.x) {
        a.cache_seqlens[i] = dsa_request_kv(a, i);
    }
    for (int r = b * blockDim.x + threadIdx.x; r < P * N; r += G * blockDim.x) {
        dsa_row_outputs(a, r);
    }
}

extern "C" __global__ void dsa_fused_walk(DsaArgs a) { dsa_fused_walk_body<false>(a, nullptr); }
extern "C" __global__ void __launch_bounds__(256, 8) dsa_fused_walk_lb8(DsaArgs a) {
    dsa_fused_walk_body<false>(a, nullptr);
}
extern "C" __global__ void __launch_bounds__(256, 8) dsa_fused_oracle(DsaArgs a, const int* oracle) {
    dsa_fused_walk_body<true>(a, oracle);
}
extern "C" __global__ void __launch_bounds__(256, 8) dsa_fused_lb8(DsaArgs a) { dsa_fused_block(a); }
// HEAD's body again, for launches with dynamic shared memory that caps blocks per SM.
extern "C" __global__ void dsa_fused_occ(DsaArgs a) { dsa_fused_block(a); }

// HEAD's fused kernel with parts switched off or moved, to find what its extras cost.
// kReal: 0 no real_page_table, 1 as HEAD (each 64th column's thread, 8 B a warp a row),
// 2 after the copy, 16 lanes of warp 0 reload the 16 sampled slots of each span and store
// them as one 64 B row segment. kLengths: the scans block and the per-request lengths.
// kKnownCols: column counts from the host instead of seq_lens.
template <int kReal, bool kLengths, bool kKnownCols>
__global__ void head_parts(DsaArgs a, const int* known_cols) {
    const int N = a.tokens;
    if (blockIdx.x == 0) {
        if (!kLengths || blockIdx.y != 0) return;
        dsa_scans_block(a);
        if (threadIdx.x == 0) a.cu_seqlens_q[a.padded_bs * N] = a.padded_bs * N;
        return;
    }
    const int i = blockIdx.x - 1, row = i * N;
    const int cols = kKnownCols ? known_cols[i] : dsa_page_cols(a, i, METAPREP_DSA_COLS_BY_BLOCK);
    int* real = a.real_page_table + (i64)row * a.real_width;
    const int pool = a.req_pool_indices[i];
    const int begin = blockIdx.y * METAPREP_PAGE_COLS_PER_BLOCK, step = gridDim.y * METAPREP_PAGE_COLS_PER_BLOCK;
    page_row_spans(a.page_table_1, a.page_width, row, N, begin, step, cols, 1, a.req_to_token,
                   a.req_stride, pool, [&](int c, int value) {
                       if (kReal != 1 || c % METAPREP_DSA_REAL_PAGE_SIZE != 0) return;
                       for (int r = 0; r < N; ++r) {
                           real[(i64)r * a.real_width + c / METAPREP_DSA_REAL_PAGE_SIZE] =
                               value / METAPREP_DSA_REAL_PAGE_SIZE;
                       }
                   });
    if (kReal == 2 && threadIdx.x < METAPREP_PAGE_COLS_PER_BLOCK / METAPREP_DSA_REAL_PAGE_SIZE) {
        const int* src = a.req_to_token + (i64)pool * a.req_stride;
        for (int b = begin; b < cols; b += step) {
            const int c = b + METAPREP_DSA_REAL_PAGE_SIZE * threadIdx.x;
            if (c >= cols) break;
            const int v = src[c] / METAPREP_DSA_REAL_PAGE_SIZE;
            for (int r = 0; r < N; ++r) real[(i64)r * a.real_width + c / METAPREP_DSA_REAL_PAGE_SIZE] = v;
        }
    }
    if (kLengths && blockIdx.y == 0) {
        if (threadIdx.x == 0) a.cache_seqlens[i] = dsa_request_kv(a, i);
        for (int j = threadIdx.x; j < N; j += blockDim.x) dsa_row_outputs(a, i * N + j);
    }
}

// Cache hints. Streaming (.cs, evict first) for the wide page_table_1 rows; evict_last for the
// small outputs so they stay in L2 instead of going back to DRAM as scattered sectors.
__device__ __forceinline__ void store_evict_last(int* p, int v) {
    asm volatile("{\n\t.reg .b64 pol;\n\tcreatepolicy.fractional.L2::evict_last.b64 pol, 1.0;\n\t"
                 "st.global.L2::cache_hint.b32 [%0], %1, pol;\n\t}" :: "l"(p), "r"(v) : "memory");
}
template <bool kStream>
__device__ __forceinline__ void store4(int* p, int4 q) {
    if (kStream) __stcs(reinterpret_cast<int4*>(p), q);
    else *reinterpret_cast<int4*>(p) = q;
}
template <bool kStream, class OnFirst>
__device__ __forceinline__ void hinted_row_spans(int* __restrict__ out, int out_width, int row,
                                               int copies, int begin, int step, int live_cols,
                                               const int* __restrict__ req_to_token,
                                               int req_stride, int pool_index, OnFirst on_first) {
    const int* src = req_to_token + (i64)pool_index * req_stride;
    int* dst = out + (i64)row * out_width;
    for (; begin + step < live_cols; begin += 2 * step) {
        const int c0 = begin + 4 * threadIdx.x, c1 = c0 + step;
        if (c1 + 4 <= live_cols && int4_aligned(dst, out_width, copies, src, c0) &&
            int4_aligned(dst, out_width, copies, src, c1)) {
            const int4 q0 = __ldg(reinterpret_cast<const int4*>(src + c0));
            const int4 q1 = __ldg(reinterpret_cast<const int4*>(src + c1));
            for (int r = 0; r < copies; ++r) {
                store4<kStream>(dst + r * (i64)out_width + c0, q0);
                store4<kStream>(dst + r * (i64)out_width + c1, q1);
            }
            on_first(c0, q0.x);
            on_first(c1, q1.x);
            continue;
        }
        int first;
        if (page_group(dst, out_width, copies, src, c0, min(live_cols, begin + METAPREP_PAGE_COLS_PER_BLOCK), 1, &first)) on_first(c0, first);
        if (page_group(dst, out_width, copies, src, c1, min(live_cols, begin + step + METAPREP_PAGE_COLS_PER_BLOCK), 1, &first)) on_first(c1, first);
    }
    for (; begin < live_cols; begin += step) {
        const int end = min(live_cols, begin + METAPREP_PAGE_COLS_PER_BLOCK);
        for (int c = begin + 4 * threadIdx.x; c < end; c += 4 * blockDim.x) {
            int first;
            if (page_group(dst, out_width, copies, src, c, end, 1, &first)) on_first(c, first);
        }
    }
}

// HEAD with cache hints: kStream page_table_1 int4 stores .cs; kRealLast real_page_table
// stores evict_last; kLenLast the per-request/row lengths evict_last.
template <bool kStream, bool kRealLast, bool kLenLast>
__global__ void head_hints(DsaArgs a, const int*) {
    const int N = a.tokens;
    if (blockIdx.x == 0) {
        if (blockIdx.y != 0) return;
        dsa_scans_block(a);
        if (threadIdx.x == 0) a.cu_seqlens_q[a.padded_bs * N] = a.padded_bs * N;
        return;
    }
    const int i = blockIdx.x - 1, row = i * N;
    const int cols = dsa_page_cols(a, i, METAPREP_DSA_COLS_BY_BLOCK);
    int* real = a.real_page_table + (i64)row * a.real_width;
    hinted_row_spans<kStream>(a.page_table_1, a.page_width, row, N, blockIdx.y * METAPREP_PAGE_COLS_PER_BLOCK,
                              gridDim.y * METAPREP_PAGE_COLS_PER_BLOCK, cols, a.req_to_token, a.req_stride,
                              a.req_pool_indices[i], [&](int c, int value) {
        if (c % METAPREP_DSA_REAL_PAGE_SIZE != 0) return;
        for (int r = 0; r < N; ++r) {
            int* p = real + (i64)r * a.real_width + c / METAPREP_DSA_REAL_PAGE_SIZE;
            if (kRealLast) store_evict_last(p, value / METAPREP_DSA_REAL_PAGE_SIZE);
            else *p = value / METAPREP_DSA_REAL_PAGE_SIZE;
        }
    });
    if (blockIdx.y == 0) {
        if (kLenLast) {
            if (threadIdx.x == 0) store_evict_last(a.cache_seqlens + i, dsa_request_kv(a, i));
            for (int j = threadIdx.x; j < N; j += blockDim.x) {
                const int r = i * N + j, len = dsa_row_len(a, r);
                if (a.seqlens_expanded != nullptr) store_evict_last(a.seqlens_expanded + r, len);
                store_evict_last(a.dsa_cache_seqlens + r, min(len, METAPREP_DSA_TOPK));
                store_evict_last(a.cu_seqlens_q + r, r);
            }
        } else {
            if (threadIdx.x == 0) a.cache_seqlens[i] = dsa_request_kv(a, i);
            for (int j = threadIdx.x; j < N; j += blockDim.x) dsa_row_outputs(a, i * N + j);
        }
    }
}
