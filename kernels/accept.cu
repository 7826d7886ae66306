// accept: the end of a step. Each live request accepts 1 + k draft tokens, k drawn from a
// truncated geometric distribution (each draft token accepted with probability p until the
// first rejection, at most `block`), and its committed length grows by that much. All
// integer arithmetic, so the CPU reference (src/prep/accept.rs) reproduces it exactly.
// Lengths that would pass `max_len` wrap back by max_len / 2 so long runs stay in bounds.

__device__ __forceinline__ unsigned mix32(unsigned x) {
    x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
    return x;
}

__device__ __forceinline__ unsigned accept_hash(unsigned seed, unsigned i, unsigned n, unsigned k) {
    return mix32(seed ^ mix32(i * 0x9e3779b9U ^ mix32(n * 0x85ebca6bU ^ mix32(k + 0x27d4eb2fU))));
}

extern "C" __global__ void accept(int* __restrict__ seq_lens, int* __restrict__ accepted,
                                  unsigned* __restrict__ step_counter, int live_bs, int block,
                                  unsigned threshold, unsigned seed, int max_len) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= live_bs) return;
    const unsigned n = step_counter[i]++;
    int a = 1;
    while (a <= block && accept_hash(seed, i, n, a) < threshold) ++a;
    accepted[i] = a;
    int next = seq_lens[i] + a;
    if (next > max_len) next -= max_len / 2;
    seq_lens[i] = next;
}
