#!/usr/bin/env python3
"""Hold `metaprep gaps` to a loop whose answer is measured: scripts/reference_loop.py's
eager-sync arm, traced with a plain torch.profiler (no record_function, no metaprep probe, as
an engine's profile endpoint records), against the same loop's untraced eager-sync and
eager-device step times.

    python3 scripts/gaps_check.py METAPREP OUT [--forward-us 100,1000,3000] [--batch-sizes 1,8]

Per cell it writes OUT/trace-f<F>-bs<B>.json.gz and runs `METAPREP gaps` on it, then prints
and writes OUT/gaps-check.csv: the measured change of the step (eager-device over eager-sync,
medians of untraced steps), what gaps predicts from removing the reads and from removing every
sync, and the ratio of each prediction to the measured change (the bar: within ±20%).
"""

import argparse
import csv
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_loop as rl  # noqa: E402


def plain_trace(engine, forwards, steps, path):
    """`steps` eager-sync steps under a bare torch.profiler, exported gzipped to `path`."""
    torch = rl.torch
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        rl.run(engine, forwards, "eager-sync", 1, steps)
    plain = path[:-len(".gz")]
    prof.export_chrome_trace(plain)
    with open(plain, "rb") as src, gzip.open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(plain)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("metaprep")
    ap.add_argument("out")
    ap.add_argument("--forward-us", type=rl.numbers(float), default="100,1000,3000")
    ap.add_argument("--batch-sizes", type=rl.numbers(int), default="1,8")
    ap.add_argument("--steps", type=int, default=60, help="untraced steps per arm")
    ap.add_argument("--trace-steps", type=int, default=12)
    args = ap.parse_args(argv)
    # The loop's own defaults (block, accept rate, context, seed, pinning).
    loop = rl.parse_args(["--out", args.out])
    rate = rl.setup(loop)
    rows = []
    for bs in args.batch_sizes:
        engine = rl.Engine(bs, loop)
        for f in args.forward_us:
            forwards = rl.forward_graphs(f, rate)
            step = {}
            for arm in ("eager-sync", "eager-device"):
                step[arm] = statistics.median(rl.run(engine, forwards, arm, loop.warmup,
                                                     args.steps)[0])
            measured = 100.0 * (step["eager-device"] / step["eager-sync"] - 1.0)
            trace = os.path.join(args.out, f"trace-f{f:g}-bs{bs}.json.gz")
            plain_trace(engine, forwards, args.trace_steps, trace)
            out = os.path.join(args.out, f"gaps-f{f:g}-bs{bs}")
            shutil.rmtree(out, ignore_errors=True)
            p = subprocess.run([args.metaprep, "gaps", trace, "--out", out, "--json"],
                               capture_output=True, text=True)
            if p.returncode != 0:
                print(f"f {f:g} bs {bs}: gaps exit {p.returncode}: {p.stderr.strip()}")
                rows.append([f, bs, step["eager-sync"], step["eager-device"], measured,
                             "", "", "", "", p.stderr.strip().splitlines()[-1:]])
                continue
            g = json.loads(p.stdout)[0]
            period = g["period_us"]["median"]
            reads = -100.0 * g["win_us"]["median"] / period
            every = -100.0 * g["every_sync_win_us"]["median"] / period
            ratio = lambda x: x / measured if measured else float("nan")  # noqa: E731
            sites = "; ".join(f"{s['site']['kind']} {s['site']['op']}"
                              for s in g["sites"] if s["calls_per_step"] > 0)
            rows.append([f, bs, step["eager-sync"], step["eager-device"], measured, reads,
                         ratio(reads), every, ratio(every), sites])
            print(f"f {f:g} bs {bs}: measured {measured:+.1f}%, gaps reads {reads:+.1f}% "
                  f"({ratio(reads):.2f}x), every sync {every:+.1f}% ({ratio(every):.2f}x); "
                  f"sites: {sites}", flush=True)
    with open(os.path.join(args.out, "gaps-check.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["forward_us", "batch_size", "eager_sync_step_us", "eager_device_step_us",
                    "measured_change_pct", "gaps_reads_change_pct", "reads_ratio",
                    "gaps_every_sync_change_pct", "every_sync_ratio", "sites"])
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
