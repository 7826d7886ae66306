"""Session 7 study (issue 24): is the post-wait probe's rise from a 1 ms to a 3 ms wait
repeatable inside one process, and what do the ops after a SECOND wait pay (the eager-sync
step waits twice: .cpu() behind the verify forward, .item() behind the draft forward)?
Prints one JSON line per block. Usage: python post_wait_study.py SCRIPTS_DIR [blocks] [reps]"""
import json, random, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import metaprep_host as mh
import torch

blocks = int(sys.argv[2]) if len(sys.argv) > 2 else 3
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 100
mh.pin_thread("auto", "study")
t = mh._tensors()
rate = mh._sleep_rate()
flag = torch.zeros(1, dtype=torch.int32, device="cuda")
PASSES = 4

def gpu_wait(us):
    torch.cuda._sleep(int(us * rate)); flag.add_(1); flag.item()

def spin(us):
    end = time.perf_counter_ns() + us * 1000
    while time.perf_counter_ns() < end:
        pass

def timed():
    marks = [time.perf_counter_ns()]
    t["cuda"].add_(1); marks.append(time.perf_counter_ns())
    for _ in range(PASSES):
        mh._mixed(t); marks.append(time.perf_counter_ns())
    return [(b - a) / 1e3 for a, b in zip(marks, marks[1:])]

# name -> what runs before the timed ops (after a synchronize)
CONFIGS = {
    "single0": lambda: None,
    "single1000": lambda: gpu_wait(1000),
    "single3000": lambda: gpu_wait(3000),
    "spin3000": lambda: spin(3000),
    # a wait, a pass of ops (27 calls, as a prep between the step's two reads), a second wait
    "w3000_ops_w1000": lambda: (gpu_wait(3000), mh._mixed(t), gpu_wait(1000)),
    "w1000_ops_w3000": lambda: (gpu_wait(1000), mh._mixed(t), gpu_wait(3000)),
    "w3000_ops_w3000": lambda: (gpu_wait(3000), mh._mixed(t), gpu_wait(3000)),
    "w1000_ops_w1000": lambda: (gpu_wait(1000), mh._mixed(t), gpu_wait(1000)),
    # a wait, a pass of ops, then the timed ops with no second wait: the first wait's
    # sequence continued past 27 calls
    "w3000_ops": lambda: (gpu_wait(3000), mh._mixed(t)),
    "w1000_ops": lambda: (gpu_wait(1000), mh._mixed(t)),
}
for _ in range(30):
    mh._mixed(t)
torch.cuda.synchronize()
rng = random.Random(int(time.time()))
for block in range(blocks):
    raw = {name: [] for name in CONFIGS}
    order = list(CONFIGS)
    for _ in range(reps):
        rng.shuffle(order)
        for name in order:
            torch.cuda.synchronize()
            CONFIGS[name]()
            raw[name].append(timed())
    torch.cuda.synchronize()
    seg = lambda rows, k: [r[k] for r in rows]
    total = lambda rows: [sum(r) for r in rows]
    out = {"block": block, "reps": reps, "segments": PASSES + 1}
    base_med = statistics.median(total(raw["single0"]))
    out["single0_total_us"] = round(base_med, 2)
    for name in CONFIGS:
        if name == "single0":
            continue
        med_diff = statistics.median(total(raw[name])) - base_med
        paired = [a - b for a, b in zip(total(raw[name]), total(raw["single0"]))]
        out[name] = {
            "extra_median_diff": round(med_diff, 2),
            "extra_paired": round(statistics.median(paired), 2),
            "extra_first_op": round(statistics.median(seg(raw[name], 0)) - statistics.median(seg(raw["single0"], 0)), 2),
            "extra_by_segment": [round(statistics.median(seg(raw[name], k)) - statistics.median(seg(raw["single0"], k)), 2) for k in range(PASSES + 1)],
        }
    out["rise_1000_3000_median_diff"] = round(out["single3000"]["extra_median_diff"] - out["single1000"]["extra_median_diff"], 2)
    out["mh_probe"] = mh.post_wait_probe()
    p = out["mh_probe"]
    out["mh_probe_rise"] = round(sum(p["extra_us"][4]) - sum(p["extra_us"][3]), 2)
    print(json.dumps(out), flush=True)
