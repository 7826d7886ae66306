# Runs repro.cu on a GPU: out[t] = n of group t (c = 4t) for end = 10.
# Correct: [4, 4, 2, 0, 0, ...]. If the int4 branch is taken for partial/empty groups
# (the suspected VIMNMX.RELU predicate miscompile), partial/empty lanes report 4.
import ctypes, sys, os
nvrtc = ctypes.CDLL(os.environ.get("NVRTC", "libnvrtc.so.13"))
cu = ctypes.CDLL("libcuda.so.1")
src = open(os.path.join(os.path.dirname(__file__), "repro.cu")).read().encode()
prog = ctypes.c_void_p()
assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src, b"repro.cu", 0, None, None) == 0
opts = (ctypes.c_char_p * 2)(b"--gpu-architecture=sm_90", b"-std=c++17")
assert nvrtc.nvrtcCompileProgram(prog, 2, opts) == 0
n = ctypes.c_size_t(); nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(n))
cubin = ctypes.create_string_buffer(n.value); nvrtc.nvrtcGetCUBIN(prog, cubin)
def ok(r, what):
    if r != 0: sys.exit(f"{what}: CUresult {r}")
ok(cu.cuInit(0), "cuInit")
dev = ctypes.c_int(); ok(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ctx = ctypes.c_void_p(); ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain")
ok(cu.cuCtxSetCurrent(ctx), "setcurrent")
mod = ctypes.c_void_p(); ok(cu.cuModuleLoadData(ctypes.byref(mod), cubin), "load")
fn = ctypes.c_void_p(); ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"repro"), "getfn")
T = 32
srcbuf = ctypes.c_uint64(); outbuf = ctypes.c_uint64()
ok(cu.cuMemAlloc_v2(ctypes.byref(srcbuf), ctypes.c_size_t(4 * 4 * T + 64)), "alloc")
ok(cu.cuMemAlloc_v2(ctypes.byref(outbuf), ctypes.c_size_t(4 * T)), "alloc")
ok(cu.cuMemsetD32_v2(srcbuf, 0, ctypes.c_size_t(4 * T + 16)), "memset")
for end in (10, 9, 11, 12, 0):
    e = ctypes.c_int(end)
    args = (ctypes.c_void_p * 3)(ctypes.addressof(srcbuf), ctypes.addressof(outbuf), ctypes.addressof(e))
    ok(cu.cuLaunchKernel(fn, 1, 1, 1, T, 1, 1, 0, None, args, None), "launch")
    ok(cu.cuCtxSynchronize(), "sync")
    out = (ctypes.c_int * T)()
    ok(cu.cuMemcpyDtoH_v2(out, outbuf, ctypes.c_size_t(4 * T)), "dtoh")
    want = [max(0, min(4, end - 4 * t)) for t in range(T)]
    got = list(out)
    print(f"end {end}: {'OK ' if got == want else 'BAD'} got {got[:6]}... want {want[:6]}...")
