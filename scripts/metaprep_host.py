"""Host-speed and profiler-cost probes for calibrating metaprep from your own engine.

Import this file in the engine's own process (it needs torch and a CUDA device; copy it
beside your script or put scripts/ on sys.path). Two things metaprep cannot see from a
profiler trace alone are measured here:

* **host speed**: how fast this process issues framework ops right now, as µs per op of a
  pass of varied small CUDA ops (`_mixed`, counted as 24 ops), bare (no profiler). A Python engine's host costs
  scale with it, and it moves between processes and even within one, so every measurement a
  prediction is judged against records it: the calibration beside its trace, and each
  reference cell beside its step times (`host_speed()`).
* **what the profiler adds**: the same small workloads timed bare and while
  `torch.profiler` records, in this process, beside your trace (`record()` or the three
  calls it is made of). `metaprep calibrate` counts the events each workload left in the
  trace, fits what one event costs, and takes that cost off every op, read and launch of your
  steps, so the profile holds what the engine pays without the profiler.

Recording a trace for `metaprep calibrate` (one per arm)::

    import metaprep_host as mh
    with mh.record("trace-eager-sync.json"):     # torch.profiler, CPU + CUDA activities
        run_steps(arm="eager-sync", steps=8)      # your loop, record_function names as
                                                  # `metaprep calibrate --help` lists
    # writes trace-eager-sync.json and trace-eager-sync.probe.json beside it

If your engine starts the profiler itself, call `bare = mh.bare_probes()` before it starts,
`inside = mh.profiled_probes()` while it records, and `mh.write_probe_file(trace_path,
bare, inside)` after the trace is written.

Timing a reference cell for `metaprep validate`: call `host_speed()` between rounds of that
cell (not while a step runs: it issues some 3,000 small ops, and returns once the GPU has run
them) and write `reference_row(...)`
lines with `write_reference(path, rows)`; the CSV's columns are documented there.
"""

import csv
import io
import json
import os
import statistics
import time

PROBE_SCHEMA = 1
PROBE_MARK = "metaprep probe"  # record_function name around each profiled workload
EMPTY_RANGE = "metaprep empty range"  # the `range` workload's own ranges
REPS = 200  # workload repetitions per timing
REPEATS = 5  # timings per workload (their median is used)

_state = {}

# The CUDA runtime and driver calls a trace's ops are classified by, as `metaprep calibrate`
# classifies them (src/calibrate/analysis.rs, rt_kind): those that make the host wait for the
# GPU, and the prefixes of kernel launches (with their Ex / ExC / _ptsz forms).
SYNC_CALLS = frozenset({"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
                        "cudaMemcpy", "cuStreamSynchronize", "cuCtxSynchronize",
                        "cuEventSynchronize"})
LAUNCH_PREFIXES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchCooperativeKernel")


def cpu_choice(text):
    """argparse type of --cpu: a CPU number, `auto` (the last one this process may use) or
    `off`, as metaprep's --cpu."""
    import argparse
    if text in ("auto", "off"):
        return text
    try:
        cpu = int(text)
    except ValueError:
        cpu = -1
    if cpu < 0:
        raise argparse.ArgumentTypeError(f"`{text}` is not a CPU: give a number, auto or off")
    return cpu


def pin_thread(choice, who):
    """Pins the calling thread as metaprep's --cpu does; returns the CPU, or None for `off`.
    The CPUs the process had before are kept for run_child."""
    allowed = sorted(os.sched_getaffinity(0))
    _state.setdefault("allowed", set(allowed))
    if choice == "off":
        return None
    cpu = allowed[-1] if choice == "auto" else choice
    if cpu not in allowed:
        raise SystemExit(f"{who}: --cpu {cpu} is not one of the CPUs this process may run on "
                         f"({allowed}); pick one of them, or --cpu auto")
    os.sched_setaffinity(0, {cpu})  # pid 0: the calling thread only, on Linux
    return cpu


def run_child(cmd):
    """Runs `cmd` (a trace process) on the CPUs this process had before pin_thread: a child
    inherits the pinned thread's one-CPU mask, and its CUDA and profiler threads would then
    share the core its measuring thread runs on."""
    import subprocess
    allowed = _state.get("allowed")
    restore = (lambda: os.sched_setaffinity(0, allowed)) if allowed else None
    subprocess.run(cmd, check=True, preexec_fn=restore)


def _torch():
    import torch  # imported on first use, so `import metaprep_host` works anywhere

    return torch


def capture(fn, warmup=1):
    """A CUDA graph of fn(), warmed up `warmup` times on a side stream as the torch docs
    prescribe (module loads and allocations happen there, not in the capture)."""
    torch = _torch()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph


def _tensors():
    """The probe's own small tensors and graphs, made once."""
    if "cuda" not in _state:
        torch = _torch()
        dev = torch.device("cuda")
        _state.update(
            cuda=torch.zeros(1, dtype=torch.int32, device=dev),
            cuda_big=torch.zeros(64, 8, dtype=torch.int32, device=dev),
            cuda_idx=torch.arange(0, 64, 2, device=dev),
            cpu_a=torch.zeros(1, dtype=torch.int32),
            cpu_b=torch.zeros(1, dtype=torch.int32),
            graph_x=torch.zeros(1, dtype=torch.int32, device=dev),
        )
        x = _state["graph_x"]
        _state["graph1"] = capture(lambda: x.add_(1))
        _state["graph16"] = capture(lambda: [x.add_(1) for _ in range(16)])
    return _state


def _workloads():
    """name -> one repetition of a workload. Their event mixes differ (cpu ops with and
    without a launch, nested ops, bare annotations), so the per-event costs can be told
    apart (a graph replay of 1 and of 16 kernels separates what a replay and what each of
    its nodes cost under CUPTI); `cuda_add` is also the host-speed workload."""
    torch = _torch()
    t = _tensors()
    return {
        "cuda_add": lambda: t["cuda"].add_(1),
        "cpu_add": lambda: torch.add(t["cpu_a"], 1, out=t["cpu_b"]),
        "range": _empty_range,
        "cuda_index": lambda: t["cuda_big"][t["cuda_idx"]],
        "cuda_repeat": lambda: t["cuda_big"].repeat_interleave(2, dim=0),
        "graph1": t["graph1"].replay,
        "graph16": t["graph16"].replay,
        "mixed": lambda: _mixed(t),
    }


def _busy_workloads():
    """The workloads timed with the GPU busy: each repetition is a 60 µs spin kernel and the
    op behind it (the spin's own launch is timed too, and counted among the events)."""
    t = _tensors()
    return {
        "spin": _busy(lambda: None),
        "cuda_add_busy": _busy(lambda: t["cuda"].add_(1)),
        "graph1_busy": _busy(t["graph1"].replay),
    }


def _mixed(t):
    """One pass of different small ops, as a prep issues them: host speed is measured on
    this, since a tight loop of one op stays in the CPU's caches and under-reports how much
    a slow host slows an engine's varied op sequence."""
    torch = _torch()
    a, idx = t["cuda_big"], t["cuda_idx"]
    v = a[:, 0]
    x = v + 1
    x = x.clamp(max=5)
    y = torch.arange(8, device=a.device, dtype=torch.int32)
    z = x[:, None] + y[None, :]
    z = z.reshape(-1)
    w = torch.where(z > 3, z, -1)
    c = torch.cumsum(v, 0, dtype=torch.int32)
    r = v.repeat_interleave(2)
    g = a.index_select(0, idx)
    m = g.max()
    s = torch.cat([v, c])
    s = s.narrow(0, 0, 8)
    f = torch.full((8,), 5, dtype=torch.int32, device=a.device)
    f.copy_(s)
    q = a[idx, :2]
    q = q // 2
    e = r.eq(1)
    e = e.any()
    k = w.masked_fill(w < 0, 0)
    k = k.sub(1)
    u = g.sum(1)
    u = u.mul(3)
    return m, e, k, u, q, f


# The unit host speed is counted in: one pass of _mixed as 24 ops. The pass makes 27 torch
# calls; only ratios of host speeds are used, and every profile and probe file so far was
# written with this divisor (probe files record it as host_speed_ops).
MIXED_OPS = 24


def _sleep_rate():
    """Cycles of torch.cuda._sleep per µs (CUDA events), measured once."""
    if "sleep_rate" not in _state:
        torch = _torch()
        torch.cuda._sleep(1000)
        torch.cuda.synchronize()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(10_000_000)
        b.record()
        b.synchronize()
        _state["sleep_rate"] = 10_000_000 / (a.elapsed_time(b) * 1e3)
    return _state["sleep_rate"]


def _busy(fn):
    """fn, issued while the GPU is busy: behind a spin kernel long enough to outlast it (an
    engine's prep launches behind its running forward; the profiler costs more there)."""
    def run():
        _torch().cuda._sleep(int(60 * _sleep_rate()))
        fn()
    return run


def _empty_range():
    with _torch().profiler.record_function(EMPTY_RANGE):
        pass


def _time_us(fn, reps):
    """µs per repetition of fn, one timing of `reps` calls."""
    start = time.perf_counter_ns()
    for _ in range(reps):
        fn()
    return (time.perf_counter_ns() - start) / 1e3 / reps


def _warm(fns):
    for fn in fns.values():
        for _ in range(20):
            fn()
    _torch().cuda.synchronize()


def host_speed(reps=20, repeats=REPEATS):
    """This process's host speed now: median µs per op of `repeats` timings of `reps` passes
    of varied small CUDA ops (`_mixed`), no profiler. Returns once the GPU has run them, so
    the next timed step does not overlap them; call it between rounds, not while a step
    runs."""
    mixed = _workloads()["mixed"]
    _warm({"mixed": mixed})
    speed = statistics.median(_time_us(mixed, reps) for _ in range(repeats)) / MIXED_OPS
    _torch().cuda.synchronize()
    return round(speed, 4)


def _all_workloads():
    return {**_workloads(), **_busy_workloads()}


def bare_probes(reps=REPS, repeats=REPEATS):
    """Every workload timed with no profiler running: name -> [µs per rep, one per timing].
    The first call for a trace notes whether a profiler already ran in this process (the
    probe file's `profiler_ran_before`), as `record` and the manual recipe both call it."""
    if not _state.get("in_trace"):
        _state["profiled_before_bare"] = _state.get("profiled", False)
        if _state["profiled_before_bare"]:
            print("metaprep_host: warning: a profiler already ran in this process; its CUDA "
                  "calls stay slower even bare: record each trace in a fresh process",
                  flush=True)
    fns = _all_workloads()
    _warm(fns)
    out = {name: [] for name in fns}
    for _ in range(repeats):  # interleaved, so a drift in host speed hits every workload alike
        for name, fn in fns.items():
            out[name].append(round(_time_us(fn, reps), 4))
            _torch().cuda.synchronize()
    return out


def profiled_probes(reps=REPS, repeats=REPEATS):
    """Every workload timed while a torch.profiler is recording, each timing inside a
    `record_function("metaprep probe <name>")`, so calibrate finds its events in the trace."""
    torch = _torch()
    fns = _all_workloads()
    _state["profiled"] = True
    _state["in_trace"] = True
    out = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            with torch.profiler.record_function(f"{PROBE_MARK} {name}"):
                out[name].append(round(_time_us(fn, reps), 4))
            torch.cuda.synchronize()
    return out


def probe_path(trace_path):
    """Where the probe file of a trace lives: `x.json` -> `x.probe.json`."""
    stem = trace_path[:-5] if trace_path.endswith(".json") else trace_path
    return stem + ".probe.json"


def write_probe_file(trace_path, bare, profiled, reps=REPS, profiler_ran_before=None):
    """The probe file `metaprep calibrate` reads beside `trace_path`. Its host speed is of the
    bare `mixed` timings given (`record`'s: those before the profiler started and after it
    stopped, which bracket the trace). `profiler_ran_before`: whether a profiler ran in this
    process before this trace's (default: whether this module saw one before `bare` was
    taken)."""
    torch = _torch()
    _state["in_trace"] = False
    speed = statistics.median(bare["mixed"]) / MIXED_OPS
    record = {
        "metaprep_probe": PROBE_SCHEMA,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "reps": reps,
        "mark": PROBE_MARK,
        "host_speed_us": round(speed, 4),
        "host_speed_workload": "mixed",
        "host_speed_ops": MIXED_OPS,
        "bare_us": bare,
        "profiled_us": profiled,
        "profiler_ran_before": bool(_state.get("profiled_before_bare")
                                    if profiler_ran_before is None else profiler_ran_before),
    }
    _write_atomic(probe_path(trace_path), json.dumps(record, indent=2) + "\n")


class record:
    """`with record(path): ...` records a torch.profiler trace (CPU + CUDA activities, or
    your own `profiler_kwargs`) of the body to `path`, with the probes measured bare before
    it and while it records, and writes the probe file beside it."""

    def __init__(self, path, **profiler_kwargs):
        torch = _torch()
        self.path = path
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        profiler_kwargs.setdefault("activities", acts)
        self.kwargs = profiler_kwargs

    def __enter__(self):
        self.bare = bare_probes()
        self.prof = _torch().profiler.profile(**self.kwargs)
        self.prof.__enter__()
        self.profiled = profiled_probes()
        return self.prof

    def __exit__(self, *exc):
        if exc[0] is None:
            more = profiled_probes()
            for name, values in more.items():
                self.profiled[name] += values
        self.prof.__exit__(*exc)
        if exc[0] is not None:
            return False
        after = bare_probes()
        for name, values in after.items():
            self.bare[name] += values
        tmp = self.path + ".tmp"
        self.prof.export_chrome_trace(tmp)
        os.replace(tmp, self.path)
        write_probe_file(self.path, self.bare, self.profiled)
        return False


# ----------------------------------------------------------------------------- reference CSV

#: The columns of a reference CSV for `metaprep validate`. Required: forward_us, batch_size,
#: block, arm, step_us (median µs of one decode step, untraced). Optional: step_us_p10,
#: step_us_p90, samples (steps measured), rounds (rounds they were split into),
#: host_speed_us (host_speed() in this process while the cell ran: median over its rounds;
#: validate rescales the profile's host costs by host_speed_us / the profile's host speed).
REFERENCE_COLUMNS = ("forward_us", "batch_size", "block", "arm", "step_us", "step_us_p10",
                     "step_us_p90", "samples", "rounds", "host_speed_us")


def reference_row(forward_us, batch_size, block, arm, step_samples_us, rounds=None,
                  host_speed_us=None):
    """One reference row from a cell's measured step times (µs)."""
    q = statistics.quantiles(step_samples_us, n=10, method="inclusive")
    return {
        "forward_us": _number(forward_us), "batch_size": batch_size, "block": block, "arm": arm,
        "step_us": round(statistics.median(step_samples_us), 3),
        "step_us_p10": round(q[0], 3), "step_us_p90": round(q[-1], 3),
        "samples": len(step_samples_us), "rounds": rounds if rounds is not None else "",
        "host_speed_us": round(host_speed_us, 4) if host_speed_us is not None else "",
    }


def write_reference(path, rows):
    """Writes reference rows as CSV (atomically: a temporary file, then a rename)."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=REFERENCE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    _write_atomic(path, text.getvalue())


def _number(value):
    return int(value) if float(value).is_integer() else float(value)


def _write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
