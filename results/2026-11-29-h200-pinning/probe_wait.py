"""Diagnostic: does PyTorch's host cost per prep depend on how long the host just waited?"""
import functools, json, os, sys, time, statistics, subprocess
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np, torch, torch.nn.functional as F
import calibrate_torch as ct
ct.torch, ct.F, ct.np = torch, F, np

args = ct.parse_args(["--out", "/tmp/x"])
cyc, _ = ct.calibrate_sleep()
dev = torch.device("cuda")
res = {"cpu": os.sched_getaffinity(0).__len__(), "cycles_per_us": cyc}

def mhz():
    try:
        vals = [float(l.split(":")[1]) for l in open("/proc/cpuinfo") if l.startswith("cpu MHz")]
        return statistics.median(vals), min(vals), max(vals)
    except Exception as e:
        return str(e)

def timed(fn):
    s = time.perf_counter_ns(); fn(); return (time.perf_counter_ns() - s) / 1e3

def run(label, state, wait_kind, w, reps=150, prep="draft"):
    p = functools.partial(state.draft_prep if prep == "draft" else state.verify_prep, "eager-device")
    for _ in range(20): p()
    out = []
    ev = torch.cuda.Event()
    for _ in range(reps):
        torch.cuda.synchronize()
        if wait_kind == "tolist":
            torch.cuda._sleep(int(w * cyc)); state.seq_lens.tolist()
        elif wait_kind == "event":
            torch.cuda._sleep(int(w * cyc)); ev.record(); ev.synchronize()
        elif wait_kind == "sleep":
            time.sleep(w / 1e6)
        elif wait_kind == "spin":
            ct.spin(w)
        elif wait_kind == "busy_gpu":  # GPU busy ahead of the prep, no wait
            torch.cuda._sleep(int(w * cyc))
        out.append(timed(p))
    torch.cuda.synchronize()
    q = np.percentile(out, [10, 50, 90])
    res[f"{label} {prep} {wait_kind} {w}"] = [round(float(v), 1) for v in q]
    print(f"{label:8s} {prep:6s} {wait_kind:9s} W={w:6}: p10 {q[0]:7.1f} med {q[1]:7.1f} p90 {q[2]:7.1f}", flush=True)

label = sys.argv[1] if len(sys.argv) > 1 else "run"
print("MHz", mhz(), "affinity", sorted(os.sched_getaffinity(0))[:4], flush=True)
for bs in (1, 64):
    st = ct.StepState(bs, args)
    for prep in ("draft", "verify"):
        run(f"{label} bs{bs}", st, "none", 0, prep=prep)
        for kind in ("tolist", "event", "sleep", "spin", "busy_gpu"):
            for w in (100, 1000, 5000):
                run(f"{label} bs{bs}", st, kind, w, prep=prep)
        run(f"{label} bs{bs}", st, "none", 0, prep=prep)
print("MHz", mhz(), flush=True)
json.dump(res, open(os.path.join(os.environ.get("OUT", "/tmp"), f"probe-{label}.json"), "w"), indent=1)
