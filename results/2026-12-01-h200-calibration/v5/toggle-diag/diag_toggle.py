# Session 4 diagnostic (issue 24): can the profiler's inflation be measured at the host speed
# of the moment? Alternate profiled and unprofiled passes of metaprep_host's mixed workload in
# one process, toggling collection with torch.profiler's toggle_collection_dynamic, and see
# whether the on/off ratio stays put while the host's level moves.
#   python3 diag_toggle.py DIR_WITH_metaprep_host.py
import statistics, sys, time
sys.path.insert(0, sys.argv[1])
import metaprep_host as mh
import torch
mixed = mh._workloads()["mixed"]
mh._warm({"mixed": mixed})
def t(reps=5):
    s = time.perf_counter_ns()
    for _ in range(reps):
        mixed()
    return (time.perf_counter_ns() - s) / 1e3 / reps / mh.MIXED_OPS
bare = []
for _ in range(40):
    bare.append(t()); torch.cuda.synchronize()
acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
print("torch", torch.__version__, "toggle:", hasattr(torch.profiler.profile, "toggle_collection_dynamic"))
on, off = [], []
with torch.profiler.profile(activities=acts) as prof:
    for i in range(120):
        prof.toggle_collection_dynamic(False, acts); torch.cuda.synchronize()
        off.append(t()); torch.cuda.synchronize()
        prof.toggle_collection_dynamic(True, acts); torch.cuda.synchronize()
        on.append(t()); torch.cuda.synchronize()
    prof.toggle_collection_dynamic(True, acts)
after = []
for _ in range(40):
    after.append(t()); torch.cuda.synchronize()
q = lambda v: f"median {statistics.median(v):.2f} p10 {sorted(v)[len(v)//10]:.2f} p90 {sorted(v)[9*len(v)//10]:.2f} min {min(v):.2f} max {max(v):.2f}"
print("bare before  ", q(bare)); print("bare after   ", q(after))
print("toggled off  ", q(off)); print("toggled on   ", q(on))
r = [a / b for a, b in zip(on, off)]
print("on/off ratio ", q(r))
# Does the ratio depend on the level? Split pairs by the off pass's speed.
pairs = sorted(zip(off, r)); h = len(pairs) // 2
print("ratio, fast half of levels", q([x[1] for x in pairs[:h]]), " slow half", q([x[1] for x in pairs[h:]]))
print("series off:", " ".join(f"{x:.1f}" for x in off))
print("series on: ", " ".join(f"{x:.1f}" for x in on))
print("series bare:", " ".join(f"{x:.1f}" for x in bare + after))
