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

If your engine starts the profiler itself, call `bare = mh.bare_probes()` and `wait =
mh.post_wait_probe()` before it starts, `inside = mh.profiled_probes()` while it records,
and `mh.write_probe_file(trace_path, bare, inside, post_wait=wait)` after the trace is
written.

A third thing is measured bare beside each trace: what host work costs right after the host
waited for the GPU (`post_wait_probe`), which a trace taken at one forward length cannot
show for another.

Timing a reference cell for `metaprep validate`: one `StepSampler` per (cell, arm), whose
`before_step()` / `after_step()` the loop calls around every step; every `every` steps it
drains the GPU and takes a short host-speed probe between two steps (4 passes of `_mixed`:
about 1.5-2.5 ms of host time), so the cell's host speed is followed *within* the cell, and
each chunk of steps between two probes is paired with the probes around it. Then
`sampler.row(...)` gives the reference row and `write_reference(path, rows)` writes the CSV;
its columns are documented there. (`host_speed()`, a longer probe, is what older loops took
between rounds.)
"""

import csv
import io
import json
import os
import random
import statistics
import time

PROBE_SCHEMA = 1
PROBE_MARK = "metaprep probe"  # record_function name around each profiled workload
EMPTY_RANGE = "metaprep empty range"  # the `range` workload's own ranges
REPS = 200  # workload repetitions per timing
REPEATS = 5  # timings per workload (their median is used)
PROBE_PASSES = 3  # timed passes of a StepSampler probe (after one warm pass)

_state = {}

# The CUDA runtime and driver calls a trace's ops are classified by, as `metaprep calibrate`
# classifies them (src/calibrate/analysis.rs, rt_kind): those that make the host wait for the
# GPU, and the prefixes of kernel launches (with their Ex / ExC / _ptsz forms).
SYNC_CALLS = frozenset({"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
                        "cudaMemcpy", "cuStreamSynchronize", "cuCtxSynchronize",
                        "cuEventSynchronize"})
LAUNCH_PREFIXES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchCooperativeKernel")


def add_no_traces(parser):
    """Both reference loops' --no-traces: the untraced grid alone, no trace processes."""
    parser.add_argument("--no-traces", action="store_true",
                        help="measure the untraced grid only, without the trace processes (a "
                             "second reference, or the untraced cell of a per-arm fit: "
                             "metaprep validate --fit)")


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


# The gaps a post-wait probe waits (µs) and what it times after each: the first op, then
# POST_WAIT_PASSES passes of `_mixed`, each timed on its own.
POST_WAIT_GAPS_US = (0, 100, 300, 1000, 3000, 10000)
POST_WAIT_PASSES = 4
# Rounds of every gap. 60 rounds with extras as differences of medians gave rises from a 1 ms
# to a 3 ms wait of -9 to +157 µs in nine probes of one process on the H200 (calibration v7,
# results/2026-12-01-h200-calibration/v7/post-wait-study): the host's speed level switches
# within a probe, and a median taken over rounds at two levels moves with the mix.
POST_WAIT_REPS = 200


def post_wait_probe(gaps_us=POST_WAIT_GAPS_US, reps=POST_WAIT_REPS, passes=POST_WAIT_PASSES):
    """What host work costs right after the host waited `gap` µs for the GPU, over what it
    costs with no wait: a `.item()` behind a `torch.cuda._sleep` of the gap, then one op and
    `passes` passes of `_mixed` (24 ops each), each timed. Each round runs every gap once, in
    a shuffled order; a segment's extra is read within its round, as its time over the same
    segment's time with no wait in that round (a ratio, so a round at a slower host level
    counts as much as one at a faster), the median ratio over rounds times the segment's
    median time with no wait. On the H200 VM the ops after a 3 ms wait (or a 3 ms Python
    spin) cost ~5-20% more, the first one most: an eager-sync step pays that after each
    read, and pays more the longer its forward. Returns the record `metaprep calibrate`
    reads from the probe file's `post_wait` (µs, at this process's host speed)."""
    torch = _torch()
    t = _tensors()
    rate = _sleep_rate()
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    for _ in range(20):
        _mixed(t)
    torch.cuda.synchronize()
    before = host_speed()
    rounds = []
    order = list(gaps_us)
    rng = random.Random(0x9a17)
    for _ in range(reps):
        rng.shuffle(order)
        times = {}
        for gap in order:
            torch.cuda.synchronize()
            if gap:
                torch.cuda._sleep(int(gap * rate))
                flag.add_(1)
                flag.item()
            marks = [time.perf_counter_ns()]
            t["cuda"].add_(1)
            marks.append(time.perf_counter_ns())
            for _ in range(passes):
                _mixed(t)
                marks.append(time.perf_counter_ns())
            times[gap] = [(marks[k + 1] - marks[k]) / 1e3 for k in range(passes + 1)]
        rounds.append(times)
    torch.cuda.synchronize()
    return post_wait_record(gaps_us, passes, rounds, (before + host_speed()) / 2)


def post_wait_record(gaps_us, passes, rounds, around_speed_us):
    """A post_wait_probe record from its rounds (each: gap -> µs per segment), the extras
    read within each round against its gap-0 times (see post_wait_probe), and
    `around_speed_us`: host_speed() before and after the probe, the probe file's own meter,
    by which a table is moved to another speed. (`host_speed_us` is the no-wait pass's µs per
    op: another meter, a single pass after a sync, read 1.23x faster than host_speed() in the
    median of 24 probe files, so it does not move a table.)"""
    base = gaps_us[0]
    segments = range(passes + 1)
    medians = {gap: [statistics.median(r[gap][k] for r in rounds) for k in segments]
               for gap in gaps_us}
    ratios = {gap: [statistics.median(r[gap][k] / r[base][k] for r in rounds) for k in segments]
              for gap in gaps_us}
    return {
        "gaps_us": list(gaps_us),
        "segment_ops": [1] + [MIXED_OPS] * passes,
        "median_us": [[round(v, 3) for v in medians[gap]] for gap in gaps_us],
        "ratio": [[round(v, 4) for v in ratios[gap]] for gap in gaps_us],
        "extra_us": [[round((q - 1) * b, 3) for q, b in zip(ratios[gap], medians[base])]
                     for gap in gaps_us],
        "reps": len(rounds),
        "estimator": "median within-round ratio to no wait, times the no-wait median",
        "host_speed_us": round(medians[base][-1] / MIXED_OPS, 4),
        "around_speed_us": round(around_speed_us, 4),
    }


def post_wait_table(probe, speed=None):
    """A post_wait_probe record as a host profile's `post_wait` table, in µs at host `speed`
    (µs per op of host_speed(): the profile's), moved there from the host_speed() taken
    around the probe (`around_speed_us`): the host's level can switch between a phase's other
    measurements and the probe. Without `speed`, or a record without `around_speed_us` (before
    calibration v7), the extras as measured. `metaprep calibrate` moves a probe file's table the
    same way."""
    own = probe.get("around_speed_us")
    scale = speed / own if speed and own else 1.0
    return {"gaps_us": probe["gaps_us"], "segment_ops": probe["segment_ops"],
            "extra_us": [[round(v * scale, 3) for v in row] for row in probe["extra_us"]]}


def post_wait_extra_us(table, gap_us, k):
    """Extra µs of framework call k (0: the first) after a wait of gap_us, as metaprep's
    steps takes it from a `post_wait` table (src/model/post_wait.rs): the call's segment's
    extra spread over its calls, linear in the wait between measured ones, the longest's
    beyond, nothing past the last segment, never below 0."""
    first = 0
    for segment, ops in enumerate(table["segment_ops"]):
        first += ops
        if k < first:
            break
    else:
        return 0.0
    gaps = table["gaps_us"]
    per_call = [row[segment] / table["segment_ops"][segment] for row in table["extra_us"]]
    if gap_us <= gaps[0]:
        value = per_call[0]
    elif gap_us >= gaps[-1]:
        value = per_call[-1]
    else:
        n = next(i for i, g in enumerate(gaps) if g > gap_us)
        w = (gap_us - gaps[n - 1]) / (gaps[n] - gaps[n - 1])
        value = per_call[n - 1] * (1 - w) + per_call[n] * w
    return max(value, 0.0)


def post_wait_total_us(table, gap_us, calls):
    """What `calls` framework calls after a wait of gap_us cost extra, in all."""
    return sum(post_wait_extra_us(table, gap_us, k) for k in range(calls))


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


def write_probe_file(trace_path, bare, profiled, reps=REPS, profiler_ran_before=None,
                     post_wait=None):
    """The probe file `metaprep calibrate` reads beside `trace_path`. Its host speed is of the
    bare `mixed` timings given (`record`'s: those before the profiler started; after it stops,
    its hooks leave CUDA calls slower). `profiler_ran_before`: whether a profiler ran in this
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
    if post_wait is not None:
        record["post_wait"] = post_wait
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
        self.post_wait = post_wait_probe()
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
        # No bare probes after it: CUDA calls stay slower once a profiler has run in the
        # process (a graph replay's launch 2.6 -> 7.6 us on an H200), so they would not be bare.
        tmp = self.path + ".tmp"
        self.prof.export_chrome_trace(tmp)
        os.replace(tmp, self.path)
        write_probe_file(self.path, self.bare, self.profiled, post_wait=self.post_wait)
        return False


# ----------------------------------------------------------------------------- reference CSV

#: The columns of a reference CSV for `metaprep validate`. Required: forward_us, batch_size,
#: block, arm, step_us (median µs of one decode step, untraced). Optional: step_us_p10,
#: step_us_p90, samples (steps measured), rounds (rounds they were split into),
#: host_speed_us (the host speed in this process while the cell ran, µs per op: the median of
#: its chunks' probes, or of host_speed() over its rounds in older files; validate rescales
#: the profile's host costs by it / the profile's host speed), host_speed_p10 and
#: host_speed_p90 (the spread of the chunks' speeds), chunk_host_speed_us and chunk_step_us
#: (`;`-separated, one value per chunk of steps between two probes: the mean of the probes
#: before and after the chunk, and the chunk's median step; validate predicts each chunk at
#: its own speed and compares the mean over chunks), forward_dev_us (median device µs of the
#: forward marked with forward_begin/forward_end, nominally forward_us), sm_clock_mhz
#: (median NVML SM clock at the probes).
REFERENCE_COLUMNS = ("forward_us", "batch_size", "block", "arm", "step_us", "step_us_p10",
                     "step_us_p90", "samples", "rounds", "host_speed_us", "host_speed_p10",
                     "host_speed_p90", "chunk_host_speed_us", "chunk_step_us", "forward_dev_us",
                     "sm_clock_mhz")


def reference_row(forward_us, batch_size, block, arm, step_samples_us, rounds=None,
                  host_speed_us=None, chunks=None, forward_dev_us=None, sm_clock_mhz=None):
    """One reference row from a cell's measured step times (µs). `chunks`: the cell's
    [(host speed µs per op, [step µs, ...]), ...] (StepSampler.chunks); with them the host
    speed columns come from the chunks and `host_speed_us` need not be given."""
    if not step_samples_us:
        raise ValueError(f"reference_row: no measured steps for {arm} at forward {forward_us} "
                         f"us, batch {batch_size}: measure more steps per cell")
    q = _spread(step_samples_us)
    row = {
        "forward_us": _number(forward_us), "batch_size": batch_size, "block": block, "arm": arm,
        "step_us": round(statistics.median(step_samples_us), 3),
        "step_us_p10": round(q[0], 3), "step_us_p90": round(q[1], 3),
        "samples": len(step_samples_us), "rounds": rounds if rounds is not None else "",
        "host_speed_us": round(host_speed_us, 4) if host_speed_us is not None else "",
    }
    for key, value in (("forward_dev_us", forward_dev_us), ("sm_clock_mhz", sm_clock_mhz)):
        row[key] = round(value, 3) if value is not None else ""
    if chunks:
        speeds = [c[0] for c in chunks]
        sq = _spread(speeds)
        row.update(host_speed_us=round(statistics.median(speeds), 4),
                   host_speed_p10=round(sq[0], 4), host_speed_p90=round(sq[1], 4),
                   chunk_host_speed_us=";".join(f"{v:.4f}" for v in speeds),
                   chunk_step_us=";".join(f"{statistics.median(c[1]):.3f}" for c in chunks))
    return row


def _spread(values):
    """p10 and p90 (inclusive quantiles; the value itself for one)."""
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=10, method="inclusive")
    return q[0], q[-1]


def chunk_mean(chunks, predict=None):
    """The estimator validate compares (src/calibrate/validate.rs): the mean over chunks of
    each chunk's median step, or, with `predict` (host speed -> step µs), of the prediction
    at each chunk's own speed. With a host speed that switches between levels, the median of
    all steps falls in whichever level held most steps (or between them), while this mean
    moves with the mix of levels exactly as a prediction linear in the speed does."""
    if predict is None:
        return statistics.fmean(statistics.median(steps) for _, steps in chunks)
    return statistics.fmean(predict(speed) for speed, _ in chunks)


# ----------------------------------------------------------------------------- step sampler

def probe_speed(passes=PROBE_PASSES):
    """A short host-speed probe: µs per op of one pass of `_mixed` (the median of `passes`
    timed passes after one warm pass), with the GPU drained first so every probe sees it
    idle, as host_speed() and the probe files' bare timings do. About 1.5-2.5 ms on the
    H200 host; it leaves ~100 small kernels queued and does not wait for them."""
    mixed = _workloads()["mixed"]
    _torch().cuda.synchronize()
    mixed()
    times = [_time_us(mixed, 1) for _ in range(passes)]
    return round(statistics.median(times) / MIXED_OPS, 4)


def chunks_from_log(log, settle):
    """The pure arithmetic of StepSampler.end_run. `log`: in order, ("probe", speed µs/op,
    SM MHz or None) and ("step", end µs, measured?, forward µs or None) entries of one run.
    A step's time is its end minus the previous step's end. The first `settle` steps after
    each probe are not used: the first spans the probe, and the next may still be refilling
    a one-step-ahead pipeline. Returns [{"speed", "before", "after", "steps", "forward"}]:
    one per probe followed by used steps, `speed` the mean of the probes before and after
    (one level switch inside a chunk is as likely anywhere in it; without a probe after,
    the one before)."""
    chunks, current, prev_end, since = [], None, None, 0
    for entry in log:
        if entry[0] == "probe":
            if current is not None:
                current["after"] = entry[1]
            current = {"before": entry[1], "after": None, "steps": [], "forward": []}
            chunks.append(current)
            since = 0
            continue
        _, end, measured, fwd = entry
        since += 1
        if measured and current is not None and prev_end is not None and since > settle:
            current["steps"].append(end - prev_end)
            if fwd is not None:
                current["forward"].append(fwd)
        prev_end = end
    out = []
    for c in chunks:
        if c["steps"]:
            after = c["after"] if c["after"] is not None else c["before"]
            out.append({**c, "speed": (c["before"] + after) / 2})
    return out


def _nvml_sm_clock():
    """A function returning the SM clock (MHz) of GPU 0 through NVML (ctypes on the
    driver's libnvidia-ml.so.1), or None where NVML cannot be loaded."""
    if "nvml" not in _state:
        _state["nvml"] = None
        try:
            import ctypes
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            handle = ctypes.c_void_p()
            index = int((os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0])
            if lib.nvmlInit_v2() == 0 and lib.nvmlDeviceGetHandleByIndex_v2(
                    index, ctypes.byref(handle)) == 0:
                mhz = ctypes.c_uint()

                def read():
                    ok = lib.nvmlDeviceGetClockInfo(handle, 1, ctypes.byref(mhz)) == 0  # SM
                    return mhz.value if ok else None
                _state["nvml"] = read
        except (OSError, ValueError, AttributeError):
            pass
    return _state["nvml"]() if _state["nvml"] else None


class StepSampler:
    """Follows this process's host speed within one (cell, arm) of a reference, and times its
    steps. Per step of the loop::

        s.before_step(measure=k >= warmup)   # between steps: runs a probe every `every` steps
        ...  s.forward_begin(); verify_forward.replay(); s.forward_end()  ...  # optional
        done = s.after_step()                 # after the step's last launch: its end event

    and `s.begin_run()` / `s.end_run()` around each round (end_run syncs and reads the
    events; the round's closing probe brackets its last chunk). `s.chunks` then holds one
    (host speed, [step µs]) per chunk, `s.steps` every used step, and `s.row(...)` the
    reference row. A probe costs ~1.5-2.5 ms of host time and a GPU drain; with
    `settle` 2 it costs the loop 2 unmeasured steps per `every`.
    """

    def __init__(self, every=12, settle=2, passes=PROBE_PASSES):
        if settle < 1:
            # The first step after a probe spans it (its time is end minus the previous end).
            raise ValueError("StepSampler: `settle` must be at least 1: the first step after a "
                             "probe spans the probe")
        if every <= settle:
            raise ValueError("StepSampler: `every` must exceed `settle`")
        self.every, self.settle, self.passes = every, settle, passes
        self.chunks, self.steps, self.forward, self.clocks, self.runs = [], [], [], [], 0
        self._log = None

    def begin_run(self):
        self._log, self._k, self._fwd = [], 0, None

    def before_step(self, measure=True):
        # Only measured steps count toward the schedule, and warm-up steps get no probe: the
        # first probe lands right before the first measured step, so the first chunk's speed
        # is not taken before the warm-up.
        if measure and self._k % self.every == 0:
            self._probe()
        self._measure = measure
        if measure:
            self._k += 1

    def forward_begin(self):
        self._fwd = [_event(), None]

    def forward_end(self):
        self._fwd[1] = _event()

    def after_step(self, event=None):
        """Records the step's end event (or takes `event`, already recorded); returns it."""
        if event is None:
            event = _event()
        self._log.append(["step", event, self._measure, self._fwd])
        self._fwd = None
        return event

    def _probe(self):
        self._log.append(("probe", probe_speed(self.passes), _nvml_sm_clock()))

    def end_run(self):
        self._probe()
        _torch().cuda.synchronize()
        first = next(e[1] for e in self._log if e[0] == "step")
        log = []
        for e in self._log:
            if e[0] == "probe":
                log.append(e)
                if e[2] is not None:
                    self.clocks.append(e[2])
                continue
            fwd = e[3][0].elapsed_time(e[3][1]) * 1e3 if e[3] and e[3][1] else None
            log.append(("step", first.elapsed_time(e[1]) * 1e3, e[2], fwd))
        for c in chunks_from_log(log, self.settle):
            self.chunks.append((c["speed"], c["steps"]))
            self.steps += c["steps"]
            self.forward += c["forward"]
        self.runs += 1
        self._log = None

    def row(self, forward_us, batch_size, block, arm):
        return reference_row(
            forward_us, batch_size, block, arm, self.steps, rounds=self.runs, chunks=self.chunks,
            forward_dev_us=statistics.median(self.forward) if self.forward else None,
            sm_clock_mhz=statistics.median(self.clocks) if self.clocks else None)


def _event():
    event = _torch().cuda.Event(enable_timing=True)
    event.record()
    return event


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


def speed_line(speeds, where):
    """What `--speed` prints: the median of `speeds` (µs per op) with their range, where they
    were taken, and the `steps` flag that runs the model at that speed."""
    median = round(statistics.median(speeds), 3)
    return (
        f"host speed: {median} us per op (median of {len(speeds)} probes, "
        f"{min(speeds):.3f}-{max(speeds):.3f}) in {where}\n"
        f"run the step model at it: metaprep steps --host-speed-us {median}"
    )


def main(argv=None):
    """`python3 metaprep_host.py --speed`: this host's framework speed in a minute, and the
    flag that runs `metaprep steps` at it (the step between the built-in profile and a full
    calibration). Exit 3 where there is no PyTorch with CUDA to measure with."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--speed", action="store_true", help="measure and print this host's speed")
    ap.add_argument("--probes", type=int, default=5, help="host-speed probes (5)")
    args = ap.parse_args(argv)
    if not args.speed:
        ap.print_help()
        return 2
    if args.probes < 1 or args.probes > 1000:
        print(f"metaprep_host: error: --probes {args.probes} is outside 1-1000", file=sys.stderr)
        return 2
    try:
        torch = _torch()
        if not torch.cuda.is_available():
            raise RuntimeError("PyTorch sees no CUDA device")
    except Exception as e:  # ImportError, or a torch without CUDA
        print(f"metaprep_host: error: no PyTorch with CUDA to measure with ({e}): run this "
              "with the Python of your engine, on its GPU host", file=sys.stderr)
        return 3
    speeds = [host_speed() for _ in range(args.probes)]
    where = f"PyTorch {torch.__version__} on {torch.cuda.get_device_name()}"
    print(speed_line(speeds, where))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
