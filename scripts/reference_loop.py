#!/usr/bin/env python3
"""A second engine-like PyTorch decode loop, to hold metaprep's step model against.

    python3 scripts/reference_loop.py --out DIR [--forward-us 100,1000,3000] [--batch-sizes 1,8,64]

It is written apart from scripts/calibrate_torch.py's loop on purpose, so that a validation
is not passed only by the loop the calibration was built around: its own preps (other ops:
index_select, gather, masked_fill, narrow, cumsum into a slice; reads by `.cpu()` and by
`.max().item()`), other host segments (a Python scheduler that does list work, result
processing and bookkeeping after the verify forward and after accept), a sampling phase of
five ops, forwards as CUDA graphs of `torch.cuda._sleep` (the draft forward three kernels,
the verify forward one), and the host allowed one step ahead of the GPU.

What it writes, following the README's calibration recipe exactly:
* `reference.csv` (metaprep_host.REFERENCE_COLUMNS): untraced step times per (forward,
  batch size, arm), each cell's arms interleaved over rounds, each step timed by a
  `metaprep_host.StepSampler` that probes the host speed every --probe-every steps (so each
  chunk of steps has its own host speed) and times the verify forward on the device; this
  process runs no profiler until the grid is done.
* `trace-ARM.json` + `trace-ARM.probe.json` per arm: a few steps at batch 1 and
  --trace-forward-us, each in a fresh process, recorded with `metaprep_host.record`, for
  `metaprep calibrate`; and `trace-graph-bsN.json` at each --trace-batch-sizes (the preps'
  GPU time per batch, `calibrate --gpu-trace`). Beside each, its bare and traced timings.
* `loop.json`: every sample of the grid.

Arms: eager-sync (reads the lengths each prep, uploads host lists), eager-device (device
constants and static widths, no read), graph (the eager-device preps captured once and
replayed), graph-upload (graph, with a host list uploaded into the replay's input first).
"""

import argparse
import collections
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import metaprep_host as mh  # noqa: E402

ARMS = ("eager-sync", "eager-device", "graph", "graph-upload")
# eager-sync's host ops without their waits: the reads land in pinned memory when they land
# (the host uses the last value that did) and the host lists go up from pinned memory. Not in
# the grid: scripts/gaps_check.py measures it, to hold what `gaps` says removing a wait wins.
NOWAIT = "eager-nowait"
WINDOW, TOPK, PAGE = 128, 2048, 256
VOCAB = 64

torch = None


def numbers(kind):
    def parse(text):
        values = [kind(v) for v in text.split(",") if v.strip()]
        if not values or any(v <= 0 for v in values):
            raise argparse.ArgumentTypeError(f"`{text}`: give numbers above 0")
        return values
    return parse


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--forward-us", type=numbers(float), default="100,1000,3000")
    p.add_argument("--batch-sizes", type=numbers(int), default="1,8,64")
    p.add_argument("--block", type=int, default=5)
    p.add_argument("--accept-rate", type=float, default=0.778544,
                   help="per-draft-token acceptance rate (3.51 tokens per step at block 5)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--round-steps", type=int, default=36,
                   help="steps per round after its warm-up (a whole number of --probe-every)")
    p.add_argument("--probe-every", type=int, default=12,
                   help="a host-speed probe every this many steps (StepSampler; the 2 steps "
                        "after each are not measured)")
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--trace-steps", type=int, default=6)
    p.add_argument("--trace-forward-us", type=float, default=1000.0,
                   help="forward of the traced cell (batch 1)")
    p.add_argument("--trace-batch-sizes", type=numbers(int), default="8,64",
                   help="batch sizes of the extra graph-arm traces (the preps' GPU time)")
    mh.add_no_traces(p)
    p.add_argument("--trace-arm", choices=ARMS, default=None,
                   help="(internal) record one trace of this arm in this fresh process and exit")
    p.add_argument("--trace-batch", type=int, default=1, help="(internal) with --trace-arm")
    p.add_argument("--max-context", type=int, default=16384)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--cpu", type=mh.cpu_choice, default="auto",
                   help="CPU to pin this thread to: a number, auto, off")
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def spin(us):
    end = time.perf_counter_ns() + int(us * 1e3)
    while time.perf_counter_ns() < end:
        pass


class Engine:
    """One batch size's state: inputs, static outputs, preps and their graphs."""

    def __init__(self, bs, args):
        # Every draw of this batch size from its own seeded generator (the accept counts
        # too: torch.distributions draws from the global one, which --seed did not fix), so
        # a trace process and the grid see the same inputs at one batch size.
        gen = torch.Generator().manual_seed(args.seed * 1_000_003 + bs)
        dev = self.dev = torch.device("cuda")
        i32 = torch.int32
        self.bs, self.n, self.ctx = bs, args.block, args.max_context
        self.lens0 = torch.randint(1500, 6000, (bs,), generator=gen, dtype=i32).to(dev)
        self.seq_lens = self.lens0.clone()
        self.rows = torch.randperm(bs + 3, generator=gen)[:bs].to(dev, i32)
        self.req_to_token = torch.randperm((bs + 3) * self.ctx, generator=gen).to(
            dev, i32).view(bs + 3, self.ctx)
        self.new_slots = torch.randint(0, (bs + 3) * self.ctx, (bs, self.n), generator=gen,
                                       dtype=i32).to(dev)
        self.block_const = torch.full((bs,), self.n, dtype=i32, device=dev)
        self.extend_in = torch.full((bs,), self.n, dtype=i32, device=dev)
        self.offsets = torch.arange(1, self.n + 1, dtype=i32, device=dev)
        self.win_cols = torch.arange(WINDOW + self.n, dtype=i32, device=dev)
        self.logits = torch.randn(bs, self.n + 1, VOCAB, generator=gen).to(dev)
        self.drafts = torch.randint(0, VOCAB, (bs, self.n + 1), generator=gen).to(dev)
        p = (1 - args.accept_rate ** (self.n + 1)) / (1 - args.accept_rate) if args.accept_rate else 1
        counts = torch.binomial(torch.full((32, bs), float(self.n)),
                                torch.full((32, bs), (p - 1) / self.n), generator=gen).to(i32) + 1
        self.accepts = [row.to(dev) for row in counts]
        z = zeros_on(dev)
        nb = bs * self.n
        self.out = {
            "lens_ext": z(bs), "extend": z(bs), "causal": z(nb), "pos": z(nb), "page0": z(bs, 1),
            "swa": z(bs, WINDOW + self.n), "swa_len": z(nb), "kv_lens": z(bs), "cu_k": z(bs + 1),
            "pages": z(bs, self.ctx), "rows_exp": z(nb), "pages_exp": z(nb, self.ctx),
            "topk_lens": z(nb), "cu_topk": z(nb + 1),
        }
        self.host_lens = torch.empty(bs, dtype=i32, pin_memory=True)
        self.host_max = self.lens0.max().cpu().pin_memory()
        self.draft_graph = capture(lambda: self.draft_prep_eager(False))
        self.verify_graph = capture(lambda: self.verify_prep_eager(False))

    def reset(self):
        self.seq_lens.copy_(self.lens0)
        torch.cuda.synchronize()

    def upload_unwaited(self, values):
        pinned = torch.tensor(values, dtype=torch.int32, pin_memory=True)
        return pinned.to(self.dev, non_blocking=True)

    def draft_prep_eager(self, sync, wait=True):
        out, n, lens = self.out, self.n, self.seq_lens
        if sync:
            if wait:
                host_lens = lens.cpu()  # READ: the eager path wants host lengths for max_seq_len
            else:
                host_lens = self.host_lens
                host_lens.copy_(lens, non_blocking=True)
            self.max_len = int(host_lens.max()) + n
            if wait:
                extend = torch.tensor([n] * self.bs, dtype=torch.int32, device=self.dev)
            else:
                extend = self.upload_unwaited([n] * self.bs)
        else:
            extend = self.block_const
        out["extend"].copy_(extend)
        torch.add(lens, n, out=out["lens_ext"])
        causal = (lens.unsqueeze(1) + self.offsets).flatten()
        out["causal"].copy_(causal)
        torch.sub(causal, 1, out=out["pos"])
        table = self.req_to_token.index_select(0, self.rows)
        out["page0"].copy_(table.narrow(1, 0, 1).div(PAGE, rounding_mode="floor"))
        cached = lens.clamp(max=WINDOW)
        col = (lens - cached).unsqueeze(1) + self.win_cols
        window = table.gather(1, col.clamp(max=self.ctx - 1).long())
        fresh_at = (self.win_cols - cached.unsqueeze(1)).clamp(0, n - 1).long()
        window = torch.where(self.win_cols < cached.unsqueeze(1), window,
                             self.new_slots.gather(1, fresh_at))
        out["swa"].copy_(window.masked_fill(self.win_cols >= (cached + n).unsqueeze(1), -1))
        out["swa_len"].copy_((cached + n).repeat_interleave(n))

    def verify_prep_eager(self, sync, wait=True):
        out, n, lens, bs = self.out, self.n, self.seq_lens, self.bs
        if sync and wait:
            width = int(lens.max().item()) + n  # READ for max_seqlen_k
        elif sync:
            self.host_max.copy_(lens.max(), non_blocking=True)
            width = min(int(self.host_max) + n, self.ctx)
        else:
            width = self.ctx
        kv = lens + n
        out["kv_lens"].copy_(kv)
        torch.cumsum(kv, 0, dtype=torch.int32, out=out["cu_k"][1:])
        pages = self.req_to_token.index_select(0, self.rows).narrow(1, 0, width)
        out["pages"].narrow(1, 0, width).copy_(pages)
        if sync and wait:
            extend = torch.tensor([n] * bs, dtype=torch.int32, device=self.dev)
        elif sync:
            extend = self.upload_unwaited([n] * bs)
        else:
            extend = self.extend_in
        exp = (kv - extend).unsqueeze(1) + self.offsets
        out["rows_exp"].copy_(exp.flatten())
        out["pages_exp"].narrow(1, 0, width).copy_(pages.repeat_interleave(n, dim=0))
        topk = exp.flatten().clamp(max=TOPK)
        out["topk_lens"].copy_(topk)
        torch.cumsum(topk, 0, dtype=torch.int32, out=out["cu_topk"][1:])

    def prep(self, which, arm):
        if arm in ("graph", "graph-upload"):
            if arm == "graph-upload":
                self.extend_in.copy_(torch.tensor([self.n] * self.bs, dtype=torch.int32,
                                                  device=self.dev))
            (self.draft_graph if which == "draft" else self.verify_graph).replay()
        elif which == "draft":
            self.draft_prep_eager(arm in ("eager-sync", NOWAIT), wait=arm != NOWAIT)
        else:
            self.verify_prep_eager(arm in ("eager-sync", NOWAIT), wait=arm != NOWAIT)

    def sample(self):
        probs = self.logits.softmax(-1)
        hit = probs.argmax(-1).eq(self.drafts)
        return hit.int().cumprod(1).sum(1)

    def accept(self, k):
        self.seq_lens.add_(self.accepts[k % len(self.accepts)])


def zeros_on(dev):
    return lambda *shape: torch.zeros(shape, dtype=torch.int32, device=dev)


def capture(fn):
    """A CUDA graph of fn() (metaprep_host.capture, three warm-ups)."""
    return mh.capture(fn, warmup=3)


def forward_graphs(us, cycles_per_us):
    draft = capture(lambda: [torch.cuda._sleep(int(us / 3 * cycles_per_us)) for _ in range(3)])
    verify = capture(lambda: torch.cuda._sleep(int(us * cycles_per_us)))
    return draft, verify


def cycles_per_us():
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(20_000_000)
    b.record()
    b.synchronize()
    return 20_000_000 / (a.elapsed_time(b) * 1e3)


class Scheduler:
    """Stand-in for an engine's Python scheduler: real list and dict work each step."""

    def __init__(self, bs):
        self.queue = collections.deque(range(bs))
        self.meta = {i: [0] * 16 for i in range(bs)}

    def schedule(self):
        for _ in range(len(self.queue)):
            r = self.queue.popleft()
            self.meta[r] = [v + 1 for v in self.meta[r]]
            self.queue.append(r)
        spin(120)


def run(engine, forwards, arm, warmup, steps, annotate=False, sampler=None):
    """Runs warmup + steps decode steps; returns the measured steps' µs and host prep µs.
    With a metaprep_host.StepSampler, it times the steps (and the verify forward) and probes
    the host speed between them as the calibration recipe says."""
    mark = torch.profiler.record_function if annotate else (lambda _n: _Null())
    draft_fwd, verify_fwd = forwards
    engine.reset()
    sched = Scheduler(engine.bs)
    ends = []
    pending = collections.deque()
    prep_us = []
    if sampler is not None:
        sampler.begin_run()
    for k in range(warmup + steps):
        if sampler is not None:
            sampler.before_step(measure=k >= warmup)  # between steps: maybe a probe
        with mark("step"):
            if len(pending) == 2:
                pending.popleft().synchronize()  # at most one step ahead of the GPU
            with mark("schedule"):
                sched.schedule()
            t0 = time.perf_counter_ns()
            with mark("draft prep"):
                engine.prep("draft", arm)
            t1 = time.perf_counter_ns()
            with mark("draft forward"):
                draft_fwd.replay()
            with mark("sample"):
                engine.sample()
            t2 = time.perf_counter_ns()
            with mark("verify prep"):
                engine.prep("verify", arm)
            t3 = time.perf_counter_ns()
            with mark("verify forward"):
                if sampler is not None:
                    sampler.forward_begin()
                verify_fwd.replay()
                if sampler is not None:
                    sampler.forward_end()
            with mark("process results"):
                spin(60)
            with mark("accept"):
                engine.accept(k)
            with mark("bookkeeping"):
                spin(40)
            if sampler is not None:
                end = sampler.after_step()
            else:
                end = torch.cuda.Event(enable_timing=True)
                end.record()
            pending.append(end)
            ends.append(end)
            prep_us.append((t1 - t0 + t3 - t2) / 1e3)
    torch.cuda.synchronize()
    if sampler is not None:
        sampler.end_run()
    step_us = [ends[i - 1].elapsed_time(ends[i]) * 1e3 for i in range(warmup, len(ends))]
    return step_us, prep_us[warmup:]


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def setup(args):
    """torch on CUDA, this thread pinned; the _sleep rate."""
    global torch
    import torch as t
    torch = t
    if not torch.cuda.is_available():
        raise SystemExit("reference_loop: CUDA is not available to torch")
    os.makedirs(args.out, exist_ok=True)
    rate = cycles_per_us()
    mh.pin_thread(args.cpu, "reference_loop")
    return rate


def write_json(path, value):
    with open(path + ".tmp", "w") as fh:
        json.dump(value, fh, indent=1)
    os.replace(path + ".tmp", path)


def record_trace(args):
    """--trace-arm: this fresh process records one trace (after some untraced steps)."""
    rate = setup(args)
    engine = Engine(args.trace_batch, args)
    forwards = forward_graphs(args.trace_forward_us, rate)
    arm = args.trace_arm
    bare_step, bare_prep = run(engine, forwards, arm, args.warmup, args.round_steps)
    name = f"trace-{arm}" + ("" if args.trace_batch == 1 else f"-bs{args.trace_batch}")
    path = os.path.join(args.out, name + ".json")
    with mh.record(path):
        step, prep = run(engine, forwards, arm, 1, args.trace_steps - 1, annotate=True)
    write_json(os.path.join(args.out, name + ".timings.json"), {
        "arm": arm, "batch_size": args.trace_batch, "forward_us": args.trace_forward_us,
        "traced": {"step_us": step, "prep_us": prep},
        "bare": {"step_us": bare_step, "prep_us": bare_prep}})
    print(f"wrote {path}", flush=True)
    return 0


def main(argv=None):
    args = parse_args(argv)
    if args.trace_arm is not None:
        return record_trace(args)
    rate = setup(args)
    engines = {bs: Engine(bs, args) for bs in args.batch_sizes}
    if args.round_steps % args.probe_every:
        raise SystemExit("reference_loop: --round-steps must be a multiple of --probe-every")
    forwards = {f: forward_graphs(f, rate) for f in args.forward_us}
    rows, cells = [], []
    for bs in args.batch_sizes:
        for f in args.forward_us:
            got = {arm: {"prep": []} for arm in ARMS}
            samplers = {arm: mh.StepSampler(every=args.probe_every) for arm in ARMS}
            for r in range(args.rounds):
                for arm in ARMS[r % 4:] + ARMS[:r % 4]:
                    _, prep = run(engines[bs], forwards[f], arm, args.warmup, args.round_steps,
                                  sampler=samplers[arm])
                    got[arm]["prep"] += prep
            for arm in ARMS:
                s = samplers[arm]
                rows.append(s.row(f, bs, args.block, arm))
                cells.append({"forward_us": f, "batch_size": bs, "arm": arm, **got[arm],
                              "chunks": s.chunks, "forward_dev_us": s.forward,
                              "sm_clock_mhz": s.clocks})
                print(f"f {f:g} bs {bs} {arm}: step {rows[-1]['step_us']} us, host prep "
                      f"{statistics.median(got[arm]['prep']):.1f} us, host speed "
                      f"{rows[-1]['host_speed_us']} us/op (p10 {rows[-1]['host_speed_p10']}, "
                      f"p90 {rows[-1]['host_speed_p90']}), verify forward "
                      f"{rows[-1]['forward_dev_us']} us, SM {rows[-1]['sm_clock_mhz']} MHz",
                      flush=True)
    mh.write_reference(os.path.join(args.out, "reference.csv"), rows)
    write_json(os.path.join(args.out, "loop.json"), {"args": vars(args), "cycles_per_us": rate,
                                                      "cells": cells})
    # The traces, one fresh process each (README: calibration recipe).
    if args.no_traces:
        return 0
    jobs = [(arm, 1) for arm in ARMS] + [("graph", bs) for bs in args.trace_batch_sizes]
    for arm, bs in jobs:
        # Every flag of this run travels (the last of a repeated flag wins), so none is lost.
        mh.run_child([sys.executable, os.path.abspath(__file__), *args.argv,
                      "--trace-arm", arm, "--trace-batch", str(bs)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
