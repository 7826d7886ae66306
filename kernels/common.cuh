// Shared by every family. The Rust side prepends the constants (METAPREP_PAGE_SIZE,
// METAPREP_SWA_WINDOW, METAPREP_DSA_TOPK, METAPREP_SWA_ALIGN, ...) so there is one source of
// truth.
//
// Conventions: every buffer is int32 and row-major, sized for the padded batch; the kernels
// compute the first `bs` requests (the argument blocks' `bs`) and leave the rest as they were.
// Graph arms pass the padded batch, whose padding rows hold the engine's fill values
// (sequence length 1, pool row 0, KV slot 0), as SGLang's graph runner fills them; eager arms
// pass the live batch, as SGLang's eager path never pads. `host_block`, when not null, is the
// `[block] * bs` list a reading arm (or graph-upload) built on the host and copied up; device-only arms
// pass null and use the block size they were launched with.

typedef long long i64;

__device__ __forceinline__ int align_up(int x, int a) { return (x + a - 1) / a * a; }
__device__ __forceinline__ int ceil_div(int x, int a) { return (x + a - 1) / a; }

__device__ __forceinline__ int block_of(const int* host_block, int i, int block) {
    return host_block != nullptr ? host_block[i] : block;
}

// Cache policy of the prep's stores (values are unaffected). The 16-byte page-row stores are
// written once a step and not read back by the prep: they stream through L2 marked evict-first
// (`st.global.cs`). The small outputs (real_page_table's sampled cells, the lengths and their
// prefix sums) are marked evict-last, so they tend to stay in L2 until the next step rewrites
// them instead of being evicted by the page-row stream: on the H200, fused verify at batch
// 1024, block 5 wrote 2.1 MB less to DRAM a step and ran 6-8% faster back to back
// (results/2026-11-30-h200-fused-l2-policy). Whether the attention kernels that read them
// next find them in L2 is not measured here.
__device__ __forceinline__ void store_streaming(int* p, int4 q) {
    __stcs(reinterpret_cast<int4*>(p), q);
}

__device__ __forceinline__ void store_kept(int* p, int v) {
#if __CUDA_ARCH__ >= 800
    // Not volatile: the compiler may compute the policy once for all of a thread's stores.
    unsigned long long policy;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    asm volatile("st.global.L2::cache_hint.b32 [%0], %1, %2;" ::"l"(p), "r"(v), "l"(policy)
                 : "memory");
#else
    *p = v;
#endif
}

// Whether column c of `src` and of each of the `copies` rows of `dst` starts 16 bytes
// aligned. The rows' pitch matters only when there is more than one, so a single row of an
// odd width keeps the int4 path wherever its own columns are aligned.
__device__ __forceinline__ bool int4_aligned(const int* dst, i64 row_pitch, int copies,
                                             const int* src, int c) {
    const unsigned long long pitch = copies > 1 ? (unsigned long long)(row_pitch * 4) : 0ull;
    return ((reinterpret_cast<unsigned long long>(src + c) |
             reinterpret_cast<unsigned long long>(dst + c) | pitch) &
            15) == 0;
}

// One thread's group of four page-table columns [c, c + 4) of a row whose first `cols`
// columns are written: column k holds token k * stride's slot divided by stride (its page),
// copied into `copies` rows `row_pitch` ints apart (the rows of one request are alike).
// With stride 1 and 16-byte aligned rows the group moves as one int4 load and one int4 store
// per row; otherwise cell by cell. `first` gets column c's value (the group's first cell),
// for callers that also write every 64th column elsewhere.
__device__ __forceinline__ bool page_group(int* __restrict__ dst, i64 row_pitch, int copies,
                                           const int* __restrict__ src, int c, int cols,
                                           int stride, int* first) {
    if (c >= cols) return false;
    int v[4];
    // Keep `whole` a direct comparison. A variant that computed n = max(0, min(4, cols - c))
    // and tested n == 4 compiled (NVRTC 13.0, sm_90) to one VIMNMX.RELU with a predicate
    // output standing for n == 4, and on the H200 its partial groups took the int4 path and
    // wrote past their columns (check caught it; the PTX was right).
    const bool whole = stride == 1 && c + 4 <= cols && int4_aligned(dst, row_pitch, copies, src, c);
    if (whole) {
        const int4 q = __ldg(reinterpret_cast<const int4*>(src + c));
        for (int r = 0; r < copies; ++r) store_streaming(dst + r * row_pitch + c, q);
        *first = q.x;
        return true;
    }
    const int n = min(4, cols - c);
    for (int k = 0; k < n; ++k) v[k] = src[(i64)(c + k) * stride] / stride;
    for (int r = 0; r < copies; ++r) {
        for (int k = 0; k < n; ++k) dst[r * row_pitch + c + k] = v[k];
    }
    *first = v[0];
    return true;
}

// Groups start at multiples of four columns: int4 alignment, and every 64th column of a
// real_page_table is some group's first.
static_assert(METAPREP_PAGE_COLS_PER_BLOCK % 4 == 0, "page spans must hold whole groups of four");

// This block's share of one page-table row (and its `copies` - 1 identical successors). A
// row is cut into spans of METAPREP_PAGE_COLS_PER_BLOCK columns; block y of the row takes
// spans y, y + gridDim.y, ... up to `live_cols`, each thread four columns at a time. The host
// bounds gridDim.y so the grid stays near a few blocks per SM however wide the static width
// is. `on_first(c, value)` sees each group's first column and its value.
//
// Where a thread's groups in two consecutive spans of its block are both whole and aligned,
// it loads both before storing either: two 16-byte loads in flight per thread instead of
// one, which is what the wide verify and draft-extend copies wait on. Every other group
// goes through page_group. The pair's test compares columns directly (see page_group).
template <class OnFirst>
__device__ __forceinline__ void page_rows_span(int* __restrict__ out, int out_width, int row,
                                               int copies, int live_cols, int stride,
                                               const int* __restrict__ req_to_token,
                                               int req_stride, int pool_index,
                                               OnFirst on_first) {
    const int* src = req_to_token + (i64)pool_index * req_stride;
    int* dst = out + (i64)row * out_width;
    const int step = gridDim.y * METAPREP_PAGE_COLS_PER_BLOCK;
    // Pairs need one group a thread a span: blockDim.x * 4 columns cover the span.
    const bool pairs = stride == 1 && 4 * (int)blockDim.x == METAPREP_PAGE_COLS_PER_BLOCK;
    int begin = blockIdx.y * METAPREP_PAGE_COLS_PER_BLOCK;
    if (pairs) {
        for (; begin + step < live_cols; begin += 2 * step) {
            const int c0 = begin + 4 * threadIdx.x, c1 = c0 + step;
            if (c1 + 4 <= live_cols && int4_aligned(dst, out_width, copies, src, c0) &&
                int4_aligned(dst, out_width, copies, src, c1)) {
                const int4 q0 = __ldg(reinterpret_cast<const int4*>(src + c0));
                const int4 q1 = __ldg(reinterpret_cast<const int4*>(src + c1));
                for (int r = 0; r < copies; ++r) {
                    store_streaming(dst + r * (i64)out_width + c0, q0);
                    store_streaming(dst + r * (i64)out_width + c1, q1);
                }
                on_first(c0, q0.x);
                on_first(c1, q1.x);
                continue;
            }
            int first;
            if (page_group(dst, out_width, copies, src, c0,
                           min(live_cols, begin + METAPREP_PAGE_COLS_PER_BLOCK), stride, &first)) {
                on_first(c0, first);
            }
            if (page_group(dst, out_width, copies, src, c1,
                           min(live_cols, begin + step + METAPREP_PAGE_COLS_PER_BLOCK), stride,
                           &first)) {
                on_first(c1, first);
            }
        }
    }
    for (; begin < live_cols; begin += step) {
        const int end = min(live_cols, begin + METAPREP_PAGE_COLS_PER_BLOCK);
        for (int c = begin + 4 * threadIdx.x; c < end; c += 4 * blockDim.x) {
            int first;
            if (page_group(dst, out_width, copies, src, c, end, stride, &first)) {
                on_first(c, first);
            }
        }
    }
}

// Sum of `v` over the lanes up to this one (sums wrap like the engine's int32 cumsum).
__device__ __forceinline__ unsigned warp_inclusive_sum(unsigned v) {
    const int lane = threadIdx.x & 31;
    for (int offset = 1; offset < 32; offset <<= 1) {
        const unsigned before = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v += before;
    }
    return v;
}

// Sums of `v.x` and of `v.y` over the threads before this one in a whole block (blockDim.x a
// multiple of 32, at most 1024): warp shuffles, one shared pair per warp, three barriers for
// both sums.
__device__ uint2 block_exclusive_sums(uint2 v) {
    __shared__ uint2 warp_sums[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const uint2 inclusive = make_uint2(warp_inclusive_sum(v.x), warp_inclusive_sum(v.y));
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        const uint2 w = lane < warps ? warp_sums[lane] : make_uint2(0, 0);
        warp_sums[lane] = make_uint2(warp_inclusive_sum(w.x), warp_inclusive_sum(w.y));
    }
    __syncthreads();
    const uint2 base = warp == 0 ? make_uint2(0, 0) : warp_sums[warp - 1];
    const uint2 before = make_uint2(base.x + inclusive.x - v.x, base.y + inclusive.y - v.y);
    __syncthreads();  // warp_sums is reused by the next scan
    return before;
}

// max(0, value(0), ..., value(n - 1)), by one whole block; every thread gets it.
template <class Value>
__device__ int block_max(int n, Value value) {
    __shared__ int best;
    if (threadIdx.x == 0) best = 0;
    __syncthreads();
    int mine = 0;
    for (int k = threadIdx.x; k < n; k += blockDim.x) mine = max(mine, value(k));
    atomicMax(&best, mine);
    __syncthreads();
    const int result = best;
    __syncthreads();
    return result;
}

// Fill a buffer with the poison the checker uses to find cells nobody wrote.
extern "C" __global__ void poison_i32(int* __restrict__ buf, i64 n, int value) {
    for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (i64)gridDim.x * blockDim.x) {
        buf[k] = value;
    }
}
