// The mapped read (eager-mapped): one block copies the lengths into mapped pinned host memory
// and then publishes `seq` in the flag word the host polls (src/gpu/host_read.rs). The barrier
// puts every thread's length stores before thread 0's system-scope fence, and the fence before
// the flag store, so a host that sees `seq` in the flag sees this step's lengths; the host
// reads the lengths only then. (The same kernel as results/2026-11-29-h200-read-landing/
// probe_mapped.cu, whose host saw the data 8.9 us after the call behind 2 us of work.)
extern "C" __global__ void store_lengths_mapped(const int* __restrict__ seq_lens, int n,
                                                volatile int* host_lens, volatile unsigned* flag,
                                                unsigned seq) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) host_lens[i] = seq_lens[i];
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        *flag = seq;
    }
}
