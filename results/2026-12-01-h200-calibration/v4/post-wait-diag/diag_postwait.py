"""Diagnostic (issue 24): does host work right after a wait of W µs cost more than after a
short one? Times one `_mixed` pass (24 ops) right after: a GPU wait (sleep kernel + .item()),
a Python spin of W µs, time.sleep(W), and with no wait; W in {0, 100, 1000, 3000}; interleaved
in a random order, many repeats, pinned like the reference loops."""
import os, random, statistics, sys, time, json
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts"))
import metaprep_host as mh
import torch

mh.pin_thread(mh.cpu_choice(os.environ.get("PIN", "auto")), "diag")
t = mh._tensors()
rate = mh._sleep_rate()
flag = torch.zeros(1, dtype=torch.int32, device="cuda")
for _ in range(50):
    mh._mixed(t)
torch.cuda.synchronize()

def gpu_wait(w):
    torch.cuda._sleep(int(w * rate))
    flag.add_(1)
    flag.item()

def spin(w):
    end = time.perf_counter_ns() + w * 1000
    while time.perf_counter_ns() < end:
        pass

def sleep(w):
    time.sleep(w / 1e6)

kinds = {"gpu": gpu_wait, "spin": spin, "sleep": sleep}
waits = [0, 100, 300, 1000, 3000, 6000]
keys = [(k, w) for k in kinds for w in waits]
res = {f"{k}:{w}": [] for k, w in keys}
res_first = {f"{k}:{w}": [] for k, w in keys}
for rep in range(int(os.environ.get("REPS", 300))):
    random.shuffle(keys)
    for k, w in keys:
        torch.cuda.synchronize()
        if w:
            kinds[k](w)
        t0 = time.perf_counter_ns()
        t["cuda"].add_(1)
        t1 = time.perf_counter_ns()
        mh._mixed(t)
        t2 = time.perf_counter_ns()
        res_first[f"{k}:{w}"].append((t1 - t0) / 1e3)
        res[f"{k}:{w}"].append((t2 - t1) / 1e3 / mh.MIXED_OPS)
out = {}
for key in res:
    v = sorted(res[key]); f = sorted(res_first[key])
    q = lambda a, p: a[int(p * (len(a) - 1))]
    out[key] = dict(median=statistics.median(v), p10=q(v, .1), p90=q(v, .9),
                    first_op_median=statistics.median(f), n=len(v))
    print(f"{key:12s} per-op median {out[key]['median']:7.2f} µs  p10 {out[key]['p10']:6.2f} p90 {out[key]['p90']:6.2f}  first op {out[key]['first_op_median']:6.2f} µs")
json.dump(out, open(os.environ.get("DIAG_OUT", "diag_postwait.json"), "w"), indent=1)
