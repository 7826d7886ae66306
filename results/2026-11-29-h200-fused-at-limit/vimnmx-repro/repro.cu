// Minimal reproducer candidate: n = max(0, min(4, end - c)); take the int4 path iff n == 4 && aligned.
struct G { int v[4]; int n; };
__device__ __forceinline__ G load_group(const int* __restrict__ src, int c, int end, bool aligned) {
    G g;
    g.n = max(0, min(4, end - c));
    if (g.n == 4 && aligned) {
        const int4 q = __ldg(reinterpret_cast<const int4*>(src + c));
        g.v[0] = q.x, g.v[1] = q.y, g.v[2] = q.z, g.v[3] = q.w;
        return g;
    }
    for (int k = 0; k < g.n; ++k) g.v[k] = src[c + k];
    return g;
}
// out[t] = the n the thread's branch implies (4 when the int4 path ran), for end - c = t - 8.
extern "C" __global__ void repro(const int* __restrict__ src, int* __restrict__ out, int end) {
    const int c = 4 * (int)threadIdx.x;
    const bool aligned = ((reinterpret_cast<unsigned long long>(src)) & 15) == 0;
    G g = load_group(src, c, end, aligned);
    out[threadIdx.x] = g.n;
}
