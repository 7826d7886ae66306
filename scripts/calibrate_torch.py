#!/usr/bin/env python3
"""Measure PyTorch's host costs on a GPU host and run a reference speculative-decoding step loop.

metaprep models one decode step as a host program (scheduler, draft prep, draft forward,
sampling, verify prep, verify forward, accept) and runs it for real. This script gives it
the two things it needs from PyTorch:

* host_profile.json: what one framework op, read, graph launch and upload cost on the host,
  and how many ops, kernel launches and reads each prep issues per arm (the schema of
  host-profiles/README.md).
* reference.csv: the same step loop written in PyTorch, timed per (forward, batch size, arm),
  so the Rust model can be checked against it.

It also writes calibration.json (every number measured, with the per-op listings the counts
come from) and trace-ARM.json with trace-ARM.probe.json (torch.profiler Chrome traces of a
few reference steps of each arm, recorded as the README's calibration recipe says).

The two preps follow SGLang 0.5.23's eager metadata code: dspark_draft_block after
deepseek_v4_backend.py init_forward_metadata_dspark_draft_block, dsa_target_verify after
dsa_backend.py init_forward_metadata (target_verify branch). Arms:

  eager-sync    the preps as SGLang's eager path issues them, reading seq_lens to the host
                (`.tolist()`) and uploading host lists (`torch.tensor(list, device=...)`)
  eager-device  the same ops with device constants and static widths instead: no read
  graph         the eager-device preps captured once into CUDA graphs and replayed
  graph-upload  graph, plus a host list uploaded into the graphs' static input before each
                replay (what SGLang's merged DSA draft-extend graph path does)

Op counting: one call is profiled with torch.profiler. Its ops are the top-level cpu_op
events on the calling thread (not nested in another cpu_op); an op *reads* when a
synchronising CUDA call (cudaStreamSynchronize, cudaMemcpy, ...) happens inside it, and
*launches* when a kernel launch does. Reads are not counted among the ops.

All timing (micro-benchmarks, prep host times, the reference loop) runs before the profiler
is first started, so CUPTI's hooks cannot slow it down.
"""

import argparse
import contextlib
import functools
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import metaprep_host as mh  # noqa: E402  (imports torch only when first used)

# torch, torch.nn.functional and numpy are imported in main() after the arguments are parsed,
# so `--help` works on a machine without them.
torch = None
F = None
np = None

ARMS = ("eager-sync", "eager-device", "graph", "graph-upload")
GRAPH_ARMS = ("graph", "graph-upload")
FAMILIES = ("dspark_draft_block", "dsa_target_verify")

PAGE_SIZE = 256  # the draft page table's page size
DRAFT_PAGE_COLS = 1  # the draft page table keeps one column on CUDA
SWA_WINDOW = 128  # sliding window W
SWA_ALIGN = 64  # the SWA index matrix's width is W + block rounded up to this
DSA_TOPK = 2048  # DSA top-k: per-token cache lengths are clamped to it
REAL_PAGE = 64  # the DSA "real" page table takes every 64th slot
LOGIT_VOCAB = 32  # vocabulary of the sampling stand-in's logits
ACCEPT_ROWS = 64  # rows of the precomputed accepted-tokens table, cycled by the loop

# The seed's serving run accepted 3.51 tokens per step at block 5 (simulated acceptance);
# the per-draft-token rate alpha that gives it by expected_accept_length.
ACCEPT_RATE = 0.778544  # solves (1 - a^6) / (1 - a) = 3.51 (as metaprep steps does)
QUICK = {"steps": 30, "warmup": 5, "reps": 100, "forward_us": [1000.0], "batch_sizes": [1]}
FULL_REPS = 1000  # micro-benchmark repetitions (after warm-up)
PREP_CALLS = 200  # prep host-time repetitions
SLEEP_CAL_CYCLES = 10_000_000  # torch.cuda._sleep cycles timed to find cycles per µs
SLEEP_PROBE_US = 2000  # GPU busy time queued ahead of a call to see whether it waits
SYNC_PROBE_TRIALS = 5
KERNEL_PROBE_OPS = 20  # small kernels in the graph that times one framework kernel on the GPU
TRACE_FORWARD_US = 1000.0  # the traced loops' forward time

SYNC_CALLS, LAUNCH_PREFIXES = mh.SYNC_CALLS, mh.LAUNCH_PREFIXES  # as metaprep calibrate reads them
COUNT_MARK = "calibrate: counted call"  # record_function around a profiled call


def log(message):
    print(message, flush=True)


def r3(value):
    return round(float(value), 3)


def align_up(value, multiple):
    return (value + multiple - 1) // multiple * multiple


def expected_accept_length(alpha, block):
    """Tokens a block of `block` drafts accepts per step at per-token rate alpha, bonus
    token included: (1 - alpha^(block+1)) / (1 - alpha) (Leviathan et al. 2023)."""
    return sum(alpha ** k for k in range(block + 1))


def format_number(value):
    """100.0 -> "100", 2.5 -> "2.5" (CSV cells and log lines)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


# ----------------------------------------------------------------------------- arguments


def number_list(kind):
    """argparse type: a comma-separated list of positive numbers of `kind`."""

    def parse(text):
        try:
            values = [kind(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"`{text}` is not a comma-separated list of numbers")
        if not values or any(v <= 0 for v in values):
            raise argparse.ArgumentTypeError(f"`{text}`: give one or more numbers above 0")
        return values

    return parse


def arm_list(text):
    arms = [a.strip() for a in text.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if not arms or unknown:
        raise argparse.ArgumentTypeError(f"`{text}`: arms are {', '.join(ARMS)}")
    return arms


def length_range(text):
    try:
        lo, hi = (int(v) for v in text.split("-"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text}` is not a range LO-HI, such as 2048-8192")
    if not 1 <= lo <= hi:
        raise argparse.ArgumentTypeError(f"`{text}`: give 1 <= LO <= HI")
    return lo, hi


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--out", required=True, help="folder for the output files (created if missing)")
    p.add_argument("--forward-us", type=number_list(float), default="100,1000,3000",
                   help="forward times (µs) of the reference grid; each forward is one _sleep")
    p.add_argument("--batch-sizes", type=number_list(int), default="1,8,64",
                   help="batch sizes of the reference grid")
    p.add_argument("--block", type=int, default=5,
                   help="draft tokens per request (the draft block and the verify width N)")
    p.add_argument("--arms", type=arm_list, default=",".join(ARMS),
                   help="arms of the reference grid")
    p.add_argument("--steps", type=int, default=150, help="measured steps per grid cell")
    p.add_argument("--rounds", type=int, default=5,
                   help="each cell's steps are split over this many rounds, the arms of a "
                        "(forward, batch) interleaved in each, so host drift hits them alike")
    p.add_argument("--warmup", type=int, default=5,
                   help="unmeasured steps at the start of each run (round) before them")
    p.add_argument("--probe-every", type=int, default=12,
                   help="a host-speed probe (metaprep_host.StepSampler) every this many steps "
                        "of a run; the 2 steps after each are not measured")
    p.add_argument("--scheduler-us", type=float, default=50.0,
                   help="host busy-wait standing in for the scheduler, per step")
    p.add_argument("--accept-rate", type=float, default=ACCEPT_RATE,
                   help="per-draft-token acceptance rate alpha: a block of N drafts accepts "
                        "(1 - alpha^(N+1)) / (1 - alpha) tokens per request per step, bonus "
                        "included (Leviathan et al. 2023); the default is the seed's 3.51 "
                        "tokens at block 5")
    p.add_argument("--accept-length", type=float, default=None,
                   help="mean tokens accepted per request per step (1 .. block+1) instead of "
                        "the --accept-rate formula")
    p.add_argument("--seq-lens", type=length_range, default="2048-8192",
                   help="initial sequence lengths, drawn uniformly from LO-HI")
    p.add_argument("--max-context", type=int, default=32768,
                   help="columns of req_to_token (and the static page-table width)")
    p.add_argument("--seed", type=int, default=1, help="seed of every random input")
    p.add_argument("--cpu", type=mh.cpu_choice, default="auto",
                   help="CPU to pin the measuring thread to once CUDA is up: a number, auto (the "
                        "last CPU this process may run on, as metaprep's --cpu auto) or off; "
                        "unpinned, PyTorch's op costs after a wait move by up to 2x")
    p.add_argument("--trace-steps", type=int, default=6, help="steps in each exported trace")
    p.add_argument("--trace-batch-sizes", type=number_list(int), default="8,64",
                   help="batch sizes of the extra graph-arm traces from which calibrate takes "
                        "the preps' GPU time per batch (--gpu-trace)")
    mh.add_no_traces(p)
    p.add_argument("--trace-arm", choices=ARMS, default=None,
                   help="(internal) record one trace of this arm in this fresh process and exit")
    p.add_argument("--trace-batch", type=int, default=1, help="(internal) with --trace-arm")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 30 steps, 5 warm-up, 100 reps, forward 1000 us, batch 1 "
                        "(replaces those flags)")
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)

    args.reps = FULL_REPS
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    if args.block < 1:
        p.error("--block must be at least 1")
    if args.steps < 1 or args.warmup < 1 or args.trace_steps < 1:
        p.error("--steps, --warmup and --trace-steps must be at least 1")
    if args.probe_every < 3:
        p.error("--probe-every must be at least 3 (the 2 steps after a probe are not measured)")
    if not 1 <= args.rounds <= args.steps:
        p.error("--rounds must be between 1 and --steps")
    if args.scheduler_us < 0:
        p.error("--scheduler-us must not be negative")
    if not 0 <= args.accept_rate < 1:
        p.error("--accept-rate must lie in [0, 1)")
    if args.accept_length is None:
        args.accept_length = expected_accept_length(args.accept_rate, args.block)
    if not 1 <= args.accept_length <= args.block + 1:
        p.error(f"--accept-length must lie in 1 .. block+1 = {args.block + 1}")
    longest_run = max(args.warmup + args.steps, args.trace_steps)
    longest = args.seq_lens[1] + longest_run * (args.block + 1) + args.block
    if longest > args.max_context:
        p.error(f"--max-context {args.max_context} is too small: sequences grow to {longest} "
                f"tokens over {longest_run} steps of up to {args.block + 1}")
    return args


# ----------------------------------------------------------------------------- timing helpers


def summarize(samples):
    """Median, p10, p90 (linear interpolation) and count of µs samples, rounded."""
    p10, median, p90 = np.percentile(np.asarray(samples, dtype=float), [10, 50, 90])
    return {"median": r3(median), "p10": r3(p10), "p90": r3(p90), "reps": len(samples)}


def host_times_us(fn, reps):
    """Host µs of each of `reps` calls of fn(), each issued with the GPU idle, after warm-up."""
    for _ in range(max(10, reps // 10)):
        fn()
    samples = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1e3)
    torch.cuda.synchronize()
    return samples


def device_times_us(fn, reps):
    """GPU µs of each of `reps` calls of fn() (CUDA events around it), GPU idle before each."""
    for _ in range(max(10, reps // 10)):
        fn()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    return samples


def spin(us):
    """Busy-wait on the host for `us` µs (the scheduler stand-in)."""
    end = time.perf_counter_ns() + int(us * 1e3)
    while time.perf_counter_ns() < end:
        pass


def calibrate_sleep():
    """Cycles per µs of torch.cuda._sleep, timed with CUDA events (median of 3)."""
    torch.cuda._sleep(1000)  # loads the kernel
    torch.cuda.synchronize()
    rates = []
    for _ in range(3):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(SLEEP_CAL_CYCLES)
        end.record()
        end.synchronize()
        rates.append(SLEEP_CAL_CYCLES / (start.elapsed_time(end) * 1e3))
    return float(np.median(rates)), rates


def waits_for_stream(fn, cycles_per_us):
    """Whether fn() waits for queued GPU work: its host µs behind a SLEEP_PROBE_US _sleep."""
    samples = []
    for _ in range(SYNC_PROBE_TRIALS):
        torch.cuda.synchronize()
        torch.cuda._sleep(int(SLEEP_PROBE_US * cycles_per_us))
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1e3)
        torch.cuda.synchronize()
    median = float(np.median(samples))
    return {"waits": median > SLEEP_PROBE_US / 2, "median_us": r3(median),
            "samples_us": [r3(s) for s in samples]}


def capture(fn):
    """A CUDA graph of fn() (metaprep_host.capture, three warm-ups)."""
    return mh.capture(fn, warmup=3)


# ----------------------------------------------------------------------------- op counting


def count_ops(fn):
    """Profile one (warmed-up) call of fn() and count its ops, launches and reads."""
    fn()
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        with torch.profiler.record_function(COUNT_MARK):
            fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "count.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    return tally(events)


def tally(events):
    """Counts of the Chrome-trace events inside the COUNT_MARK annotation on its thread.

    Items are the top-level cpu_op events, plus synchronising runtime calls made outside any
    op; an item that holds a synchronising call is a read, every other item an op.
    """
    mark = next(e for e in events
                if e.get("cat") == "user_annotation" and e.get("name") == COUNT_MARK)
    lo, hi = mark["ts"], mark["ts"] + mark["dur"]

    def end(e):
        return e["ts"] + e.get("dur", 0)

    def in_call(e, cats):
        return (e.get("ph") == "X" and e.get("cat") in cats and e.get("pid") == mark["pid"]
                and e.get("tid") == mark["tid"] and lo <= e["ts"] <= hi)

    top = []
    for op in sorted((e for e in events if in_call(e, {"cpu_op"})),
                     key=lambda e: (e["ts"], -e.get("dur", 0))):
        if not top or op["ts"] >= end(top[-1]):  # else it is nested in the last top-level op
            top.append(op)
    items = [{"name": op["name"], "ts": op["ts"], "launches": 0, "syncs": False,
              "uploads": False} for op in top]
    htod = {e.get("args", {}).get("correlation") for e in events
            if e.get("ph") == "X" and e.get("cat") == "gpu_memcpy" and "HtoD" in e.get("name", "")}

    bare_calls = []  # runtime calls outside every op that do not sync (e.g. cudaGraphLaunch)
    for call in (e for e in events if in_call(e, {"cuda_runtime", "cuda_driver"})):
        name, syncs = call["name"], call["name"] in SYNC_CALLS
        owner = next((item for item, op in zip(items, top) if op["ts"] <= call["ts"] < end(op)),
                     None)
        if owner is not None:
            owner["launches"] += name.startswith(LAUNCH_PREFIXES)
            owner["syncs"] |= syncs
            owner["uploads"] |= (name.startswith("cudaMemcpy")
                                 and call.get("args", {}).get("correlation") in htod)
        elif syncs:
            items.append({"name": name, "ts": call["ts"], "launches": 0, "syncs": True,
                          "uploads": False})
        else:
            bare_calls.append(name)
    items.sort(key=lambda item: item["ts"])

    # A syncing upload (torch.tensor(list, device=...)) waits for the stream but brings
    # nothing to the host: an op, not a read, exactly as `metaprep calibrate` counts it.
    for item in items:
        item["reads"] = item["syncs"] and not item["uploads"]
    read_at = [i for i, item in enumerate(items) if item["reads"]]
    ops = [item for item in items if not item["reads"]]
    return {
        "ops": len(ops),
        "launches": sum(1 for item in ops if item["launches"]),
        "kernel_launches": sum(item["launches"] for item in items),
        "reads": len(read_at),
        "ops_before_read": read_at[0] if read_at else 0,
        "listing": [{k: item[k] for k in ("name", "launches", "syncs", "uploads")}
                    for item in items],
        "bare_calls": bare_calls,
    }


# ----------------------------------------------------------------------------- the step


def store(out, name, value):
    """Copy a prep result into its static buffer (its leading columns if the result is narrower)."""
    dst = out[name]
    if dst.shape != value.shape:
        dst = dst[:, : value.shape[1]]
    dst.copy_(value)


def accept_table(rng, rows, bs, block, mean):
    """int32-ready [rows, bs] accepted tokens per request per step, in 1..block+1, mean `mean`."""
    table = 1 + rng.binomial(block, (mean - 1) / block, size=(rows, bs))
    flat = table.reshape(-1)  # a view: fixing it up fixes the table
    target = round(mean * flat.size)
    while (short := target - int(flat.sum())) != 0:
        room = np.flatnonzero(flat <= block) if short > 0 else np.flatnonzero(flat > 1)
        picks = rng.choice(room, size=min(abs(short), room.size), replace=False)
        flat[picks] += 1 if short > 0 else -1
    return table


class StepState:
    """One batch size's device inputs, static prep outputs, preps, and their graphs."""

    def __init__(self, bs, args):
        self.read_done_ns = 0  # when the last eager-sync prep's first read returned
        self.read_start_ns = 0  # and when it began (its wait for the GPU lies between)
        dev = torch.device("cuda")
        i32 = torch.int32
        n, ctx = args.block, args.max_context
        rng = np.random.default_rng([args.seed, bs])
        self.bs, self.block, self.max_context, self.dev = bs, n, ctx, dev
        self.swa_width = align_up(SWA_WINDOW + n, SWA_ALIGN)

        lo, hi = args.seq_lens
        self.initial_seq_lens = torch.tensor(rng.integers(lo, hi + 1, size=bs), dtype=i32,
                                             device=dev)
        self.seq_lens = self.initial_seq_lens.clone()
        self.req_pool_indices = torch.arange(bs, dtype=i32, device=dev)
        self.req_to_token = torch.arange((bs + 1) * ctx, dtype=i32, device=dev).view(bs + 1, ctx)
        # The draft block's new slots: req_to_token[r, seq_lens[r] + j].
        j = torch.arange(n, dtype=i32, device=dev)
        self.out_cache_loc = (self.req_pool_indices[:, None] * ctx
                              + self.seq_lens[:, None] + j[None, :]).reshape(-1)
        self.full_to_swa = torch.arange((bs + 1) * ctx, dtype=i32, device=dev)
        # The verify's cached extend lengths; graph-upload uploads into it before each replay.
        self.static_extend = torch.full((bs,), n, dtype=i32, device=dev)

        self.logits = torch.from_numpy(
            rng.standard_normal((bs, n + 1, LOGIT_VOCAB)).astype(np.float32)).to(dev)
        self.draft_tokens = torch.from_numpy(rng.integers(0, LOGIT_VOCAB, (bs, n + 1))).to(dev)
        accepted = torch.tensor(accept_table(rng, ACCEPT_ROWS, bs, n, args.accept_length),
                                dtype=i32, device=dev)
        self.accepted_rows = list(accepted.unbind(0))  # views, so accept is a single op

        def zeros(*shape):
            return torch.zeros(shape, dtype=i32, device=dev)

        nb = bs * n
        self.draft_out = {
            "ext": zeros(bs), "extend_lens": zeros(bs), "seq_lens_causal": zeros(nb),
            "positions": zeros(nb), "page_table": zeros(bs, DRAFT_PAGE_COLS),
            "swa_indices": zeros(bs, self.swa_width), "swa_topk_lengths": zeros(nb),
        }
        self.verify_out = {
            "cache_seqlens": zeros(bs), "cu_seqlens_k": zeros(bs + 1),
            "page_table": zeros(bs, ctx), "cu_q": zeros(bs + 1), "extend": zeros(bs),
            "seqlens_expanded": zeros(nb), "page_table_1": zeros(nb, ctx),
            "dsa_cache_seqlens": zeros(nb), "dsa_cu": zeros(nb + 1),
            "real_page_table": zeros(nb, -(-ctx // REAL_PAGE)),
        }
        self.draft_max_seqlen_k = 0  # host metadata the eager-sync draft keeps from its read
        self.draft_graph = capture(functools.partial(self._draft_eager, False))
        self.verify_graph = capture(functools.partial(self._verify_eager, False))
        self.reset()

    def reset(self):
        self.seq_lens.copy_(self.initial_seq_lens)
        torch.cuda.synchronize()

    def draft_prep(self, arm):
        if arm in GRAPH_ARMS:
            self._replay(self.draft_graph, arm)
        else:
            self._draft_eager(arm == "eager-sync")

    def verify_prep(self, arm):
        if arm in GRAPH_ARMS:
            self._replay(self.verify_graph, arm)
        else:
            self._verify_eager(arm == "eager-sync")

    def _replay(self, graph, arm):
        if arm == "graph-upload":
            uploaded = torch.tensor([self.block] * self.bs, dtype=torch.int32, device=self.dev)
            self.static_extend.copy_(uploaded)
        graph.replay()

    def _draft_eager(self, sync):
        """dspark_draft_block metadata (deepseek_v4_backend.py L2204-2240)."""
        bs, n, dev, out = self.bs, self.block, self.dev, self.draft_out
        seq_lens = self.seq_lens
        if sync:  # the READ: no host copy of seq_lens exists, so the eager path makes one
            self.read_start_ns = time.perf_counter_ns()
            self.draft_max_seqlen_k = max(seq_lens.tolist()) + n
            self.read_done_ns = time.perf_counter_ns()
        store(out, "ext", seq_lens + n)
        if sync:  # built from a host list: a blocking upload
            extend_lens = torch.tensor([n] * bs, dtype=torch.int32, device=dev)
        else:
            extend_lens = torch.full((bs,), n, dtype=torch.int32, device=dev)
        store(out, "extend_lens", extend_lens)

        # Causal expansion over the block.
        j = torch.arange(n, dtype=torch.int32, device=dev)
        store(out, "seq_lens_causal", (seq_lens[:, None] + 1 + j[None, :]).reshape(-1))
        store(out, "positions", (seq_lens[:, None] + j[None, :]).reshape(-1))

        cols_end = DRAFT_PAGE_COLS * PAGE_SIZE
        store(out, "page_table",
              self.req_to_token[self.req_pool_indices, :cols_end:PAGE_SIZE] // PAGE_SIZE)

        # SWA indices: the last min(seq_len, W) cached tokens, then the block's new slots, then -1.
        cl = seq_lens.clamp(max=SWA_WINDOW)
        base = seq_lens - cl
        cols = torch.arange(self.swa_width, dtype=torch.int32, device=dev)
        rel = cols[None, :] - cl[:, None]  # < 0: cached token; 0 .. n-1: the block's new token
        positions = (base[:, None] + cols[None, :]).clamp(max=self.max_context - 1)
        cached = self.req_to_token[self.req_pool_indices[:, None], positions]
        rows = torch.arange(bs, dtype=torch.int32, device=dev)
        fresh = self.out_cache_loc.view(bs, n)[rows[:, None], rel.clamp(0, n - 1)]
        full = torch.where(rel < 0, cached, torch.where(rel < n, fresh, -1))
        store(out, "swa_indices", torch.where(full >= 0, self.full_to_swa[full.clamp(min=0)], -1))
        store(out, "swa_topk_lengths", (cl + n).repeat_interleave(n))

    def _verify_eager(self, sync):
        """dsa_target_verify metadata (dsa_backend.py L1167-1189 and L1353-1425)."""
        bs, n, dev, out = self.bs, self.block, self.dev, self.verify_out
        seq_lens = self.seq_lens
        # max_seqlen_k: eager-sync READs seq_lens for it; the others use the static width.
        self.read_start_ns = time.perf_counter_ns()
        width = max(seq_lens.tolist()) + n if sync else self.max_context
        if sync:
            self.read_done_ns = time.perf_counter_ns()
        cache_seqlens = (seq_lens + n).to(torch.int32)
        store(out, "cache_seqlens", cache_seqlens)
        store(out, "cu_seqlens_k", F.pad(torch.cumsum(cache_seqlens, 0, dtype=torch.int32), (1, 0)))
        page_table = self.req_to_token[self.req_pool_indices, :width]
        store(out, "page_table", page_table)
        store(out, "cu_q", torch.arange(0, bs * n + 1, n, dtype=torch.int32, device=dev))
        if sync:  # built from a host list: a blocking upload
            extend = torch.tensor([n] * bs, dtype=torch.int32, device=dev)
        else:
            extend = self.static_extend
        store(out, "extend", extend)
        seqlens_expanded = (cache_seqlens[:, None] - n + 1
                            + torch.arange(n, dtype=torch.int32, device=dev)[None, :]).reshape(-1)
        store(out, "seqlens_expanded", seqlens_expanded)
        page_table_1 = torch.repeat_interleave(page_table, repeats=n, dim=0)
        store(out, "page_table_1", page_table_1)
        dsa_cache_seqlens = seqlens_expanded.clamp(max=DSA_TOPK)
        store(out, "dsa_cache_seqlens", dsa_cache_seqlens)
        store(out, "dsa_cu", F.pad(torch.cumsum(dsa_cache_seqlens, 0, dtype=torch.int32), (1, 0)))
        idx = torch.arange(0, width, REAL_PAGE, device=dev)
        store(out, "real_page_table", page_table_1[:, idx] // REAL_PAGE)

    def sampling(self):
        """Accept bookkeeping on the device, no host read: argmax, eq, cumprod, sum."""
        matched = self.logits.argmax(-1).eq(self.draft_tokens)
        return matched.cumprod(1).sum(1)

    def accept(self, k):
        self.seq_lens.add_(self.accepted_rows[k % len(self.accepted_rows)])


def forward_graphs(us, cycles_per_us):
    """The draft and verify forward stand-ins: each a graph holding one `us`-µs _sleep."""
    cycles = int(us * cycles_per_us)
    return tuple(capture(lambda: torch.cuda._sleep(cycles)) for _ in ("draft", "verify"))


def no_mark(_name):
    return contextlib.nullcontext()


def timed_prep(state, prep, arm):
    """Runs prep(arm); returns its host µs, the µs from its first read's return to its end
    and that read's µs (its wait for the GPU; both meaningful for eager-sync only), and its
    start (ns)."""
    start = time.perf_counter_ns()
    prep(arm)
    end = time.perf_counter_ns()
    return ((end - start) / 1e3, (end - state.read_done_ns) / 1e3,
            (state.read_done_ns - state.read_start_ns) / 1e3, start)


HOST_KEYS = ("prep", "draft", "verify", "draft_post_read", "verify_post_read", "draft_read",
             "verify_read", "draft_gap")


def run_loop(state, forwards, arm, warmup, steps, scheduler_us, annotate=False, sampler=None):
    """The reference step loop; returns each measured step's GPU µs and host µs samples:
    `prep` (both preps), `draft` and `verify` (each prep), `draft_post_read` and
    `verify_post_read` (from the first read's return to the prep's end; eager-sync only),
    `draft_read` and `verify_read` (that read's µs, its wait included), `draft_gap` (from the
    previous step's accept to the draft prep: the wait between steps and the scheduler).
    With a metaprep_host.StepSampler, that times the steps (and the verify forward) and
    probes the host speed between them, as the calibration recipe says; the step times
    returned then include the steps it leaves out.

    Mirrors metaprep's host program: the host runs at most one step ahead of the GPU.
    """
    mark = torch.profiler.record_function if annotate else no_mark
    draft_forward, verify_forward = forwards
    state.reset()
    total = warmup + steps
    done = [None] * total
    host = {key: [] for key in HOST_KEYS}
    accept_end = None
    if sampler is not None:
        sampler.begin_run()
    for k in range(total):
        if sampler is not None:
            sampler.before_step(measure=k >= warmup)  # between steps: maybe a probe
        with mark("step"):
            if k >= 2:
                done[k - 2].synchronize()
            with mark("scheduler"):
                spin(scheduler_us)
            with mark("draft prep"):
                draft_us, draft_post_read_us, draft_read_us, draft_start = timed_prep(
                    state, state.draft_prep, arm)
            with mark("draft forward"):
                draft_forward.replay()
            with mark("sampling"):
                state.sampling()
            with mark("verify prep"):
                verify_us, verify_post_read_us, verify_read_us, _ = timed_prep(
                    state, state.verify_prep, arm)
            with mark("verify forward"):
                if sampler is not None:
                    sampler.forward_begin()
                verify_forward.replay()
                if sampler is not None:
                    sampler.forward_end()
            with mark("accept"):
                state.accept(k)
            draft_gap_us = None if accept_end is None else (draft_start - accept_end) / 1e3
            accept_end = time.perf_counter_ns()
            if sampler is not None:
                done[k] = sampler.after_step()
            else:
                done[k] = torch.cuda.Event(enable_timing=True)
                done[k].record()
        host["prep"].append(draft_us + verify_us)
        host["draft"].append(draft_us)
        host["verify"].append(verify_us)
        if draft_gap_us is not None:
            host["draft_gap"].append(draft_gap_us)
        if arm == "eager-sync":
            host["draft_post_read"].append(draft_post_read_us)
            host["verify_post_read"].append(verify_post_read_us)
            host["draft_read"].append(draft_read_us)
            host["verify_read"].append(verify_read_us)
    torch.cuda.synchronize()
    if sampler is not None:
        sampler.end_run()
    step_us = [done[k - 1].elapsed_time(done[k]) * 1e3 for k in range(max(warmup, 1), total)]
    return step_us, {key: v[warmup:] for key, v in host.items()}


def trace_path(out, arm, bs):
    return os.path.join(out, f"trace-{arm}.json" if bs == 1 else f"trace-{arm}-bs{bs}.json")


def record_trace(args):
    """--trace-arm: in this fresh process (no profiler has run in it), a few untraced steps,
    then --trace-steps steps of the arm recorded as the README's calibration recipe says
    (metaprep_host.record writes the probe file beside the trace). Writes the traced and
    the bare steps' host timings to trace-ARM[-bsN].timings.json."""
    cycles_per_us, _ = calibrate_sleep()
    mh.pin_thread(args.cpu, "calibrate_torch")
    state = StepState(args.trace_batch, args)
    forwards = forward_graphs(TRACE_FORWARD_US, cycles_per_us)
    arm = args.trace_arm
    bare_step, bare_host = run_loop(state, forwards, arm, args.warmup, args.steps // 2,
                                    args.scheduler_us)
    path = trace_path(args.out, arm, args.trace_batch)
    with mh.record(path):
        step_us, host = run_loop(state, forwards, arm, 1, args.trace_steps - 1,
                                 args.scheduler_us, annotate=True)
    write_json(path[:-5] + ".timings.json", {
        "arm": arm, "batch_size": args.trace_batch, "forward_us": TRACE_FORWARD_US,
        "traced": {"step_us": [r3(v) for v in step_us],
                   "host_us": {k: [r3(x) for x in v] for k, v in host.items()}},
        "bare": {"step_us": [r3(v) for v in bare_step],
                 "host_us": {k: [r3(x) for x in v] for k, v in bare_host.items()}}})
    log(f"wrote {path} and {mh.probe_path(path)}")
    return 0


def export_traces(args):
    """One fresh process per trace: each arm at batch 1, and the graph arm at each
    --trace-batch-sizes (for the preps' GPU time per batch)."""
    jobs = [(arm, 1) for arm in ARMS] + [("graph", bs) for bs in args.trace_batch_sizes]
    for arm, bs in jobs:
        # Every flag of this run travels (the last of a repeated flag wins), so none is lost.
        cmd = [sys.executable, os.path.abspath(__file__), *args.argv,
               "--trace-arm", arm, "--trace-batch", str(bs)]
        mh.run_child(cmd)


# ----------------------------------------------------------------------------- outputs


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    log(f"wrote {path}")


def write_json(path, value):
    write_atomic(path, json.dumps(value, indent=2) + "\n")


def write_reference(path, rows):
    """reference.csv in the format `metaprep validate` reads (metaprep_host.REFERENCE_COLUMNS)."""
    mh.write_reference(path, rows)
    log(f"wrote {path}")


def prep_entries(preps, upload_ops):
    """host_profile.json's `preps` arm entries for one family, from its measurements.
    `upload_ops`: the ops of the upload itself, which the profile's upload_us covers."""
    sync, device, graph = preps["eager-sync"], preps["eager-device"], preps["graph"]
    upload = preps["graph-upload"]
    around_upload = max(upload["ops"] + upload["reads"] - upload_ops, 0)
    if sync["reads"] < 1:
        raise RuntimeError("the eager-sync prep shows no synchronising call in its profile; "
                           f"its listing: {sync['listing']}")
    return {
        "eager_sync": {
            "ops": sync["ops"], "launches": sync["launches"], "reads": sync["reads"],
            "ops_before_read": sync["ops_before_read"], "op_us": sync["op_us"],
        },
        "eager_device": {"ops": device["ops"], "launches": device["launches"],
                         "op_us": device["op_us"]},
        "kernel_us": r3(graph["gpu_us"]["median"] / max(device["launches"], 1)),
        "kernel_us_by_batch": {str(bs): r3(v["median"] / max(device["launches"], 1))
                               for bs, v in graph["gpu_us_by_batch"].items()},
        "graph": {"ops": graph["ops"], "launches": graph["launches"]},
        "graph_upload": {"ops": around_upload,
                         "launches": min(upload["launches"], around_upload)},
    }


def in_loop_op_us(entry, arm, host, key, micro, post_wait, to_profile=1.0):
    """An eager prep's op cost from its host time inside a running loop (`host`: run_loop's
    host samples, `key`: draft or verify): eager-device, its host time over its ops;
    eager-sync, the time from its first read's return to its end, less the later reads at
    read_us, over the ops after that read. Both less what the ops cost extra for following a
    wait (`post_wait`, this process's probe): after the read's median wait (eager-sync), after
    the median gap from the last step's accept (the draft prep; the verify prep follows the
    sampling ops back to back), so the profile holds back-to-back costs and `steps` adds the
    post-wait cost at its own cells' waits. `to_profile`: the profile's host speed over the
    in-loop run's, which moves the loop's host times into the profile's (read_us and
    `post_wait` are the profile's already)."""
    if arm == "eager-sync":
        post = summarize(host[f"{key}_post_read"])
        ops = max(entry["ops"] - entry["ops_before_read"], 1)
        wait = summarize(host[f"{key}_read"])["median"]
        after = mh.post_wait_total_us(post_wait, wait, ops)
        own = (post["median"] * to_profile - (entry["reads"] - 1) * micro["read_us"]["median"]
               - after)
        return {"in_loop_post_read_us": post, "post_wait_us": r3(after), "read_wait_us": wait,
                "op_us": r3(max(own, 0.0) / ops)}
    in_loop = summarize(host[key])
    gap = summarize(host["draft_gap"])["median"] if key == "draft" else 0.0
    after = mh.post_wait_total_us(post_wait, gap, entry["ops"])
    return {"in_loop_host_us": in_loop, "post_wait_us": r3(after), "gap_us": gap,
            "op_us": r3(max(in_loop["median"] * to_profile - after, 0.0) / entry["ops"])}


PREP_SOURCES = {
    "dspark_draft_block": "op sequence after SGLang 0.5.23 deepseek_v4_backend.py "
                          "init_forward_metadata_dspark_draft_block (L2204-2240); counts from a "
                          "torch.profiler trace of one call",
    "dsa_target_verify": "op sequence after SGLang 0.5.23 dsa_backend.py init_forward_metadata "
                         "target_verify (L1167-1189) and tail (L1353-1425); counts from a "
                         "torch.profiler trace of one call",
}


def host_profile(meta, micro, probes, preps, sampling, accept, upload, args, post_wait):
    """The host profile, the eager preps' op costs from the separate in-loop run."""
    post_wait_reps = mh.POST_WAIT_REPS
    reps = args.reps
    where = f"forward {format_number(TRACE_FORWARD_US)} us, bs 1, {args.steps} steps"
    upload_probe, tolist = probes["upload"], probes["tolist"]
    return {
        "name": "pytorch",
        "source": f"scripts/calibrate_torch.py on {meta['gpu']}, torch {meta['torch']}, "
                  f"CUDA {meta['cuda']}, {meta['date']}",
        "op_us": {"value": micro["op_us"]["median"],
                  "source": f"median host time of x.add_(1) on int32[1], GPU idle, {reps} reps"},
        "read_us": {"value": micro["read_us"]["median"],
                    "source": f"median host time of seq_lens.tolist() on int32[1], GPU idle, "
                              f"{reps} reps"},
        "kernel_us": {"value": micro["kernel_us"]["median"],
                      "source": f"GPU time of a graph of {KERNEL_PROBE_OPS} x.add_(1) on int32[1], "
                                f"per op (CUDA events), GPU idle, {reps} reps"},
        "graph_launch_us": {"value": micro["graph_launch_us"]["median"],
                            "source": f"median host time of CUDAGraph.replay() of a one-kernel "
                                      f"graph (x.add_(1)), GPU idle, {reps} reps"},
        "upload_us": {"value": micro["upload_us"]["median"],
                      "source": f"median host time of torch.tensor([5], dtype=int32, "
                                f"device='cuda'), GPU idle, {reps} reps"},
        "host_speed_us": {"value": meta["host_speed_us"],
                          "source": "median of metaprep_host.host_speed() before and after the "
                                    "micro-benchmarks the costs come from (µs per op of the "
                                    "mixed pass, no profiler); each prep's in-loop op_us moved "
                                    "to it by its run's own speed (the median of its "
                                    f"StepSampler chunks: {meta['in_loop_host_speed_us']})"},
        "post_wait": {"value": post_wait,
                      "source": "metaprep_host.post_wait_probe() in this process, bare, after "
                                "the micro-benchmarks (a .item() behind a torch.cuda._sleep of "
                                "each gap, then one op and 4 passes of 24 ops, each timed; "
                                f"{post_wait_reps} reps), moved from the host_speed() "
                                "taken around it to host_speed_us"},
        "upload_syncs": {"value": upload_probe["waits"],
                         "source": f"the same upload issued behind a {SLEEP_PROBE_US} us "
                                   f"torch.cuda._sleep took {upload_probe['median_us']:.0f} us (median "
                                   f"of {SYNC_PROBE_TRIALS}); .tolist() took "
                                   f"{tolist['median_us']:.0f} us the same way"},
        "preps": {
            family: {"source": PREP_SOURCES[family] + "; kernel_us = GPU time of one graph "
                               f"replay of the prep ({preps[family]['graph']['gpu_us']['median']}"
                               " us, CUDA events, GPU idle) / the eager-device launching ops, "
                               "kernel_us_by_batch the same at each batch size of the grid; "
                               f"op_us = in-loop host time ({where}) "
                               "over the ops (eager-sync: from the first read's return, less "
                               "the later reads at read_us, over the ops after it)",
                     **prep_entries(preps[family], upload["ops"] + upload["reads"])}
            for family in FAMILIES
        },
        "program": [
            {"kind": "host", "name": "scheduler", "us": r3(args.scheduler_us),
             "source": "the reference loop's scheduler busy-wait (--scheduler-us)"},
            {"kind": "draft_prep"},
            {"kind": "draft_forward"},
            {"kind": "host", "name": "sampling", "ops": sampling["ops"],
             "source": "the reference loop's sampling: argmax, eq, cumprod, sum"},
            {"kind": "verify_prep"},
            {"kind": "verify_forward"},
            {"kind": "accept", "ops": accept["ops"]},
        ],
    }


# ----------------------------------------------------------------------------- main


def main(argv=None):
    global torch, F, np
    args = parse_args(argv)
    try:
        import numpy
        import torch as torch_module
        import torch.nn.functional as functional
    except ImportError as e:
        print(f"calibrate_torch: {e}; it needs torch and numpy", file=sys.stderr)
        return 2
    torch, F, np = torch_module, functional, numpy
    if not torch.cuda.is_available():
        print("calibrate_torch: CUDA is not available to torch; run it on the GPU host",
              file=sys.stderr)
        return 2

    os.makedirs(args.out, exist_ok=True)
    if args.trace_arm is not None:
        return record_trace(args)
    started = time.perf_counter()
    meta = {
        "tool": "scripts/calibrate_torch.py",
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
    }
    log(f"{meta['gpu']}, torch {meta['torch']}, CUDA {meta['cuda']}; writing into {args.out}")
    dev = torch.device("cuda")

    # 1. Micro-benchmarks, GPU idle before each call.
    cycles_per_us, rates = calibrate_sleep()
    log(f"_sleep: {cycles_per_us:.1f} cycles/us")
    meta["cpu"] = mh.pin_thread(args.cpu, "calibrate_torch")  # CUDA's own threads exist now and keep the whole mask
    speeds = [mh.host_speed()]  # and after the micro-benchmarks (the in-loop runs' are logged)
    log(f"measuring thread pinned to CPU {meta['cpu']}" if meta["cpu"] is not None
        else "measuring thread not pinned (--cpu off)")
    x = torch.zeros(1, dtype=torch.int32, device=dev)
    states = {bs: StepState(bs, args) for bs in sorted({1, *args.batch_sizes})}
    state1 = states[1]
    one_kernel = capture(lambda: x.add_(1))
    micro_calls = {
        "op_us": lambda: x.add_(1),
        "read_us": state1.seq_lens.tolist,
        "graph_launch_us": one_kernel.replay,
        "upload_us": lambda: torch.tensor([5], dtype=torch.int32, device=dev),
    }
    micro = {name: summarize(host_times_us(fn, args.reps)) for name, fn in micro_calls.items()}
    # GPU time of one small framework kernel: a graph of KERNEL_PROBE_OPS x.add_(1), per op.
    many_kernels = capture(lambda: [x.add_(1) for _ in range(KERNEL_PROBE_OPS)])
    per_kernel = [v / KERNEL_PROBE_OPS for v in device_times_us(many_kernels.replay, args.reps)]
    micro["kernel_us"] = summarize(per_kernel)
    post_wait_probe = mh.post_wait_probe()
    log("post-wait extra us (first op, then passes of 24) by wait: " + "; ".join(
        f"{g:g} us: {row}" for g, row in zip(post_wait_probe["gaps_us"], post_wait_probe["extra_us"])))
    speeds.append(mh.host_speed())
    for name, s in micro.items():
        log(f"{name}: median {s['median']} (p10 {s['p10']}, p90 {s['p90']}, {s['reps']} reps)")
    probes = {name: waits_for_stream(micro_calls[call], cycles_per_us)
              for name, call in (("upload", "upload_us"), ("tolist", "read_us"))}
    log(f"upload behind a {SLEEP_PROBE_US} us sleep: {probes['upload']['median_us']} us "
        f"(syncs: {probes['upload']['waits']}); tolist: {probes['tolist']['median_us']} us")
    if not probes["tolist"]["waits"]:
        raise RuntimeError("sanity check failed: .tolist() behind a queued _sleep did not wait "
                           f"for it ({probes['tolist']}); the _sleep calibration is off")

    # 2. Prep host time per family and arm at batch size 1, GPU idle before each call.
    prep_calls = min(PREP_CALLS, args.reps)
    preps = {family: {} for family in FAMILIES}
    for family, prep in zip(FAMILIES, (state1.draft_prep, state1.verify_prep)):
        for arm in ARMS:
            s = summarize(host_times_us(functools.partial(prep, arm), prep_calls))
            preps[family][arm] = {"host_us": s}
            log(f"{family} {arm}: host {s['median']} us per call (median of {s['reps']})")

    # The GPU time of each prep as a graph replay: with its kernel count, what one of the
    # framework's kernels costs the GPU in that prep.
    for family, prep in zip(FAMILIES, (state1.draft_prep, state1.verify_prep)):
        s = summarize(device_times_us(functools.partial(prep, "graph"), prep_calls))
        preps[family]["graph"]["gpu_us"] = s
        log(f"{family} graph: GPU {s['median']} us per replay (median of {s['reps']})")
    # ... and at each batch size of the grid: bigger batches, bigger kernels.
    for family, key in zip(FAMILIES, ("draft_prep", "verify_prep")):
        by_batch = {}
        for bs, state in states.items():
            prep = functools.partial(getattr(state, key), "graph")
            by_batch[bs] = summarize(device_times_us(prep, prep_calls))
        preps[family]["graph"]["gpu_us_by_batch"] = by_batch
        log(f"{family} graph: GPU us per replay by batch size: "
            + ", ".join(f"bs {bs} {v['median']}" for bs, v in by_batch.items()))

    # 3. Host time per prep inside a running step loop (forward TRACE_FORWARD_US, bs 1), its
    # own run before the reference grid: an op costs more there than alone on an idle GPU.
    forwards = {us: forward_graphs(us, cycles_per_us)
                for us in sorted({*args.forward_us, TRACE_FORWARD_US})}
    # The profile's host speed is the micro-benchmarks' (the two probes around them): most of
    # its costs come from them. Each in-loop run's op costs are moved to it by that run's own
    # speed (the median of its sampler's chunks), rather than outvoting it with those chunks.
    micro_speed = float(np.median(speeds))
    in_loop, in_loop_speed = {}, {}
    for arm in ("eager-sync", "eager-device"):
        sampler = mh.StepSampler(every=args.probe_every)
        in_loop[arm] = run_loop(state1, forwards[TRACE_FORWARD_US], arm, args.warmup,
                                args.steps, args.scheduler_us, sampler=sampler)[1]
        chunk_speeds = [speed for speed, _ in sampler.chunks]
        in_loop_speed[arm] = float(np.median(chunk_speeds)) if chunk_speeds else micro_speed
        speeds += chunk_speeds
    meta["host_speed_us"] = r3(micro_speed)
    meta["in_loop_host_speed_us"] = {arm: r3(v) for arm, v in in_loop_speed.items()}
    # The probe ran in the micro-benchmarks' phase, whose speed is the profile's, but the
    # level can switch inside a phase: moved from the probe's own speed to the profile's.
    post_wait = mh.post_wait_table(post_wait_probe, micro_speed)
    meta["host_speed_samples_us"] = [r3(v) for v in speeds]
    log(f"host speed {meta['host_speed_us']} us/op (the micro-benchmarks'; every probe of "
        f"this phase {min(speeds):.2f}-{max(speeds):.2f}, in-loop runs {meta['in_loop_host_speed_us']})")
    for arm, host in in_loop.items():
        log(f"in the loop, {arm}: " + ", ".join(
            f"{key} {summarize(v)['median']} us" for key, v in host.items() if v))

    # 4. The reference grid.
    cells, rows = [], []
    n_cells = len(args.batch_sizes) * len(args.forward_us) * len(args.arms)
    # Whole chunks of --probe-every steps per round, enough for --steps measured per cell.
    used = args.probe_every - 2
    per_round = -(-args.steps // args.rounds // used) * args.probe_every
    for bs in args.batch_sizes:
        state = states[bs]
        for fwd in args.forward_us:
            samples = {arm: {"prep": [], "host": {key: [] for key in HOST_KEYS}}
                       for arm in args.arms}
            # Each step timed, and the host speed probed every --probe-every steps, by the
            # recipe's sampler: each chunk of steps gets its own host speed.
            samplers = {arm: mh.StepSampler(every=args.probe_every) for arm in args.arms}
            for r in range(args.rounds):
                # Rotate the arms' order each round, so none always runs first.
                order = args.arms[r % len(args.arms):] + args.arms[:r % len(args.arms)]
                for arm in order:
                    _, host = run_loop(state, forwards[fwd], arm, args.warmup, per_round,
                                       args.scheduler_us, sampler=samplers[arm])
                    samples[arm]["prep"] += host["prep"]
                    for key in HOST_KEYS:
                        samples[arm]["host"][key] += host[key]
            for arm in args.arms:
                got, sampler = samples[arm], samplers[arm]
                rows.append(sampler.row(fwd, bs, args.block, arm))
                cell = {"forward_us": fwd, "batch_size": bs, "block": args.block, "arm": arm,
                        "step_us": summarize(sampler.steps),
                        "host_prep_us": summarize(got["prep"]),
                        "chunks": [{"host_speed_us": r3(sp), "step_us": [r3(v) for v in st]}
                                   for sp, st in sampler.chunks],
                        "forward_dev_us": [r3(v) for v in sampler.forward],
                        "sm_clock_mhz": sampler.clocks,
                        "host_prep_us_samples": [r3(v) for v in got["prep"]],
                        "host_us": got["host"]}
                cells.append(cell)
                log(f"[{len(cells)}/{n_cells}] forward {format_number(fwd)} us, bs {bs}, {arm}: "
                    f"step {cell['step_us']['median']} us (p10 {cell['step_us']['p10']}, "
                    f"p90 {cell['step_us']['p90']}), host prep {cell['host_prep_us']['median']} "
                    f"us, host speed {rows[-1]['host_speed_us']} us/op (p10 "
                    f"{rows[-1]['host_speed_p10']}, p90 {rows[-1]['host_speed_p90']}), verify "
                    f"forward {rows[-1]['forward_dev_us']} us, SM {rows[-1]['sm_clock_mhz']} MHz")
    write_reference(os.path.join(args.out, "reference.csv"), rows)

    # 5. Op counts, from the profiler (started only now: CUPTI stays hooked once it has run).
    for family, prep, key in zip(FAMILIES, (state1.draft_prep, state1.verify_prep),
                                 ("draft", "verify")):
        for arm in ARMS:
            entry = preps[family][arm]
            entry.update(count_ops(functools.partial(prep, arm)))
            if arm in in_loop:
                entry.update(in_loop_op_us(entry, arm, in_loop[arm], key, micro, post_wait,
                                           micro_speed / in_loop_speed[arm]))
            log(f"{family} {arm}: {entry['ops']} ops, {entry['launches']} launching, "
                f"{entry['reads']} reads ({entry['ops_before_read']} ops before the first)"
                + (f", {entry['op_us']} us per op" if "op_us" in entry else ""))
    sampling = count_ops(state1.sampling)
    accept = count_ops(functools.partial(state1.accept, 0))
    upload = count_ops(micro_calls["upload_us"])
    state1.reset()
    log(f"sampling: {sampling['ops']} ops; accept: {accept['ops']} ops")

    write_json(os.path.join(args.out, "host_profile.json"),
               host_profile(meta, micro, probes, preps, sampling, accept, upload, args,
                            post_wait))
    write_json(os.path.join(args.out, "calibration.json"), {
        **meta,
        "args": vars(args),
        "sleep": {"cycles_per_us": r3(cycles_per_us), "samples": [r3(v) for v in rates],
                  "calibration_cycles": SLEEP_CAL_CYCLES},
        "micro": micro,
        "post_wait_probe": post_wait_probe,
        "sync_probes": {"sleep_us": SLEEP_PROBE_US, **probes},
        "preps": preps,
        "sampling": sampling,
        "accept": accept,
        "upload": upload,
        "reference": cells,
    })

    # 6. Traces of a few reference steps, one fresh process each, as the calibration recipe
    # records them (README); each writes its traced and bare host timings beside it.
    if not args.no_traces:
        export_traces(args)
    log(f"done in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
