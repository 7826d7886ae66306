#!/usr/bin/env python3
"""Hold `metaprep gaps` to a loop whose answer is measured: the eager-sync arm of
scripts/reference_loop.py (or, with --loop calibrate, of scripts/calibrate_torch.py's loop),
traced with a plain torch.profiler (no record_function, no metaprep probe, as an engine's
profile endpoint records), against the same loop's untraced eager-sync and eager-device steps.

    python3 scripts/gaps_check.py METAPREP OUT [--forward-us 100,1000,3000] [--batch-sizes 1,8]
                                               [--loop reference|calibrate]

Each cell runs in a process of its own (a profiler leaves hooks behind in its process). Per
cell it writes OUT/trace-f<F>-bs<B>.json.gz with its probe file beside it (recorded by
scripts/metaprep_host.py's `record`, the recipe an engine follows), runs `METAPREP gaps` on it
(whose gaps.json gives the figures with the probe file and as traced), then prints and writes
OUT/gaps-check.csv, again after every cell so that a run cut short keeps the cells it finished:
the measured change of the step (eager-device over eager-sync: the median over rounds of
untraced steps, each round's order the mirror of the last, of the change within the round,
with the eager-sync drift between the first and second half of the rounds), what
gaps predicts from removing the reads and the reads and uploads, each with and without the
probe, and every sync with it, and the ratio of each prediction to the measured change (the
bar: within ±20% with the probe), and the same for the reads and uploads in µs a step (what a
host that changed speed between the untraced steps and the trace moves less), and the
profiler's cost a step as the probe file prices it against the traced step's excess over the
untraced one. Beside it, reference_loop's eager-nowait arm (eager-sync's host ops without their
waits): what the waits alone cost, set against gaps' every-sync figure.

    python3 scripts/gaps_check.py METAPREP OUT --reread OUT/gaps-check.csv

needs no GPU: it makes the gaps columns again from the traces OUT kept, the measured ones as
they were (OUT/gaps-check-reread.csv), so a change to `gaps` is held against measured cells.
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
import metaprep_host as mh  # noqa: E402
import reference_loop as rl  # noqa: E402

DRIFT_PCT = 5.0


def plain_trace(run, steps, path):
    """`steps` eager-sync steps (`run(arm, steps)`) recorded as an engine would with
    `metaprep_host.record` (a bare torch.profiler, its probe file beside the trace), exported
    gzipped to `path`."""
    plain = path[:-len(".gz")]
    with mh.record(plain):
        run("eager-sync", steps)
    with open(plain, "rb") as src, gzip.open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(plain)


def reference_loop(out, f, bs):
    """scripts/reference_loop.py at its defaults: `run(arm, steps)` -> step µs, and its arms
    beside eager-sync and eager-device (the waits-only arm)."""
    loop = rl.parse_args(["--out", out])
    rate = rl.setup(loop)
    engine = rl.Engine(bs, loop)
    forwards = rl.forward_graphs(f, rate)
    return (lambda arm, steps: rl.run(engine, forwards, arm, loop.warmup, steps)[0]), (rl.NOWAIT,)


def calibrate_loop(out, f, bs):
    """scripts/calibrate_torch.py's reference loop at its defaults (a scheduler spin, SGLang's
    eager preps), with no waits-only arm."""
    import calibrate_torch as ct
    args = ct.parse_args(["--out", out])
    rl.setup(rl.parse_args(["--out", out]))  # torch imported, this thread pinned
    import numpy
    ct.torch, ct.F, ct.np = rl.torch, rl.torch.nn.functional, numpy
    rate, _ = ct.calibrate_sleep()
    state = ct.StepState(bs, args)
    forwards = ct.forward_graphs(f, rate)

    def run(arm, steps):
        return ct.run_loop(state, forwards, arm, args.warmup, steps, args.scheduler_us)[0]
    return run, ()


LOOPS = {"reference": reference_loop, "calibrate": calibrate_loop}


def trace_path(out, f, bs):
    """Where a cell's trace goes (its probe file beside it)."""
    return os.path.join(out, f"trace-f{f:g}-bs{bs}.json.gz")


def round_order(arms, rounds):
    """The arms' blocks in `rounds` rounds, each round's order the mirror of the last."""
    return [arm for r in range(rounds) for arm in (arms if r % 2 == 0 else arms[::-1])]


def within_rounds(blocks, arm):
    """From each arm's block medians, one a round: each arm's step (median over rounds), the
    change of `arm` over eager-sync in percent and the µs it saves (medians of the changes
    within each round), and eager-sync's drift in percent between the first and the second
    half of the rounds."""
    sync = blocks["eager-sync"]
    step = {a: statistics.median(b) for a, b in blocks.items()}
    change = statistics.median(100.0 * (x / s - 1.0) for x, s in zip(blocks[arm], sync))
    saved = statistics.median(s - x for x, s in zip(blocks[arm], sync))
    half = len(sync) // 2
    drift = 100.0 * (statistics.mean(sync[half:]) / statistics.mean(sync[:half] or sync) - 1.0)
    return step, change, saved, drift


def over(x, base):
    """`x` over `base`; NaN where `base` is 0 (or missing)."""
    return x / base if base else float("nan")


def measure(args, run, extra_arms):
    """The loop's untraced steps of the arms in rounds, each round's order the mirror of the
    last (sync, device | device, sync | ...): the cell's measured columns, but for its
    forward and batch size."""
    order = ("eager-sync", "eager-device", *extra_arms)
    blocks = {arm: [] for arm in order}
    for arm in round_order(order, args.rounds):
        blocks[arm].append(statistics.median(run(arm, max(1, args.steps // args.rounds))))
    step, measured, measured_us, drift = within_rounds(blocks, "eager-device")
    nowait = within_rounds(blocks, rl.NOWAIT)[1] if rl.NOWAIT in blocks else float("nan")
    return {"eager_sync_step_us": step["eager-sync"],
            "eager_device_step_us": step["eager-device"], "measured_change_pct": measured,
            "measured_win_us": measured_us, "eager_sync_drift_pct": drift, "rounds": args.rounds,
            "eager_nowait_step_us": step.get(rl.NOWAIT, ""), "nowait_change_pct": nowait}


def one_cell(args, f, bs):
    """One cell: the untraced steps of the arms, the trace and its probe file, and what
    `gaps` makes of it with and without the probe file; its CSV row, by column. With
    `args.untraced_only`, the untraced steps alone."""
    run, extra_arms = LOOPS[args.loop](args.out, f, bs)
    # The untraced rounds run before the trace (a profiler leaves its process slower). The
    # change is read within each round, so a host whose launch path flips state for seconds
    # moves both sides of a pair; what it did across the rounds shows as drift between the
    # eager-sync steps of the first and the second half of the rounds.
    row = {"forward_us": f, "batch_size": bs, **measure(args, run, extra_arms)}
    if args.untraced_only:
        return row
    trace = trace_path(args.out, f, bs)
    plain_trace(run, args.trace_steps, trace)
    return gaps_columns(args.metaprep, args.out, trace, row)


def with_remeasure(row, again):
    """`row` with the loop measured `again` in a fresh process after its trace: the measured
    side's own spread across the trace, and the prediction given the untraced step against it
    (a host-paced cell's measured change is one draw of the host's state, as its trace is)."""
    change = again["measured_change_pct"]
    row = {**row, **{f"after_{a}": again[k] for k, a in AFTER.items()},
           "measured_spread_pct": change - row["measured_change_pct"]}
    stepped = row.get("stepped_gaps_reads_uploads_change_pct")
    if stepped is not None:
        row["stepped_after_ratio"] = over(stepped, change)
    return row


def run_gaps(metaprep, trace, out, *flags):
    """`metaprep gaps TRACE --json` into a fresh `out`: (its first trace's record, None), or
    (None, the error's last line)."""
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run([metaprep, "gaps", trace, "--out", out, "--json", *flags],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, f"gaps exit {p.returncode}: " + "".join(p.stderr.strip().splitlines()[-1:])
    return json.loads(p.stdout)[0], None


def gaps_columns(metaprep, out, trace, row):
    """What `metaprep gaps` makes of a cell's trace, added to `row`, which holds the cell's
    measured columns (MEASURED): the predictions and their ratios to the measured change."""
    f, bs, drift = row["forward_us"], row["batch_size"], row["eager_sync_drift_pct"]
    measured, measured_us = row["measured_change_pct"], row["measured_win_us"]
    nowait = row["nowait_change_pct"]
    ratio = lambda x: over(x, measured)  # noqa: E731
    out = os.path.join(out, f"gaps-f{f:g}-bs{bs}")
    g, error = run_gaps(metaprep, trace, out)
    if error:
        print(f"f {f:g} bs {bs}: {error}", file=sys.stderr)
        row["sites"] = error
        return row
    row["sites"] = "; ".join(f"{s['site']['kind']} {s['site']['op']}"
                             for s in g["sites"] if s["calls_per_step"] > 0)
    # The per-event costs fitted from the probe file: what a correction rests on.
    for kind, cost in (g["profiler_event_costs_us"] or {}).items():
        row[f"event_cost_{kind}_us"] = cost
    # How far those costs miss the probe's largest workload (as the summary says).
    largest = max(g.get("probe_fit") or [], key=lambda r: r["overhead_us"], default=None)
    if largest and largest["overhead_us"] > 0:
        row["probe_fit_largest"] = largest["workload"]
        miss = largest["fitted_us"] / largest["overhead_us"] - 1.0
        row["probe_fit_largest_miss_pct"] = 100.0 * miss
    every = -100.0 * g["every_sync_win_us"]["median"] / g["period_us"]["median"]
    row.update({"gaps_every_sync_change_pct": every, "every_sync_ratio": ratio(every),
                "every_sync_nowait_ratio": over(every, nowait)})
    # The headline's figures with the probe file, and as traced (the profiler's cost left in,
    # what a bare recording gives).
    for name, h in (("gaps", g), ("unprobed", g["as_traced"])):
        col = (lambda c: c) if name == "gaps" else (lambda c: f"unprobed_{c}")
        reads = h["itl_change_pct"]["median"]
        # What eager-device drops: the reads and the uploads (either left would wait in place).
        both = h["reads_and_uploads_itl_change_pct"]["median"]
        both_us = h["reads_and_uploads_win_us"]["median"]
        row.update({col("gaps_reads_change_pct"): reads, col("reads_ratio"): ratio(reads),
                    col("gaps_reads_uploads_change_pct"): both,
                    col("reads_uploads_ratio"): ratio(both),
                    # In µs too: a host whose speed moved between the untraced steps and the
                    # trace moves a percentage's base, not the µs removed.
                    col("traced_step_us"): h["period_us"]["median"],
                    col("gaps_reads_uploads_win_us"): both_us,
                    col("reads_uploads_win_ratio"): over(both_us, measured_us)})
        print(f"f {f:g} bs {bs} {name}: measured {measured:+.1f}% (drift {drift:+.1f}%, waits "
              f"alone {nowait:+.1f}%), gaps reads and uploads {both:+.1f}% ({ratio(both):.2f}x), "
              f"reads {reads:+.1f}% ({ratio(reads):.2f}x); sites: {row['sites']}",
              file=sys.stderr, flush=True)
    # Given the loop's untraced eager-sync step, as a user gives their measured ITL: the
    # traced host time scaled by the one factor that makes the median step that long.
    s, error = run_gaps(metaprep, trace, out + "-stepped",
                        "--untraced-step-us", f"{row['eager_sync_step_us']:.3f}")
    shutil.rmtree(out + "-stepped", ignore_errors=True)
    if error:
        row["stepped_error"] = error
    else:
        both = s["reads_and_uploads_itl_change_pct"]["median"]
        row.update({"stepped_gaps_reads_uploads_change_pct": both,
                    "stepped_reads_uploads_ratio": ratio(both),
                    "stepped_host_scale": s["host_scale"]})
    # What the profiler cost a step: as the probe file prices it (what gaps took off), and as
    # the trace ran over the untraced step (the same where the probes price its events right
    # and the host held still).
    row["profiler_fitted_us"] = g["profiler_us"]["median"]
    row["profiler_excess_us"] = g["as_traced"]["period_us"]["median"] - row["eager_sync_step_us"]
    print(f"f {f:g} bs {bs}: every sync {every:+.1f}% ({ratio(every):.2f}x); profiler cost "
          f"{row['profiler_fitted_us']:.0f} us a step as fitted, "
          f"{row['profiler_excess_us']:.0f} us over the untraced step", file=sys.stderr, flush=True)
    return row


# The columns a cell measured on the GPU, which a re-read keeps.
MEASURED = ("forward_us", "batch_size", "eager_sync_step_us", "eager_device_step_us",
            "measured_change_pct", "measured_win_us", "eager_sync_drift_pct", "rounds",
            "eager_nowait_step_us", "nowait_change_pct", "tries")
# The measured columns of a cell's measurement after its trace (`--remeasure`), by their
# after_* names.
AFTER = {"measured_change_pct": "change_pct", "measured_win_us": "win_us",
         "eager_sync_drift_pct": "drift_pct", "eager_sync_step_us": "eager_sync_step_us"}


def reread(metaprep, out, csv_path):
    """Each row of an earlier check's CSV with its `gaps` columns made again from the trace it
    kept (OUT/trace-f<F>-bs<B>.json.gz and its probe file): a change to `gaps` held against
    measured cells with no GPU. Rows whose trace is not in OUT are left out, and said."""
    rows = []
    with open(csv_path, newline="") as fh:
        for old in csv.DictReader(fh):
            row = {k: _number(old[k]) for k in MEASURED if k in old}
            row["batch_size"] = int(row["batch_size"])
            trace = trace_path(out, row["forward_us"], row["batch_size"])
            if not os.path.exists(trace):
                print(f"{trace}: not here, its row left out", file=sys.stderr)
                continue
            row = gaps_columns(metaprep, out, trace, row)
            if old.get("after_change_pct"):  # measured again after its trace: kept as it was
                again = {k: _number(old[f"after_{a}"]) for k, a in AFTER.items()}
                row = with_remeasure(row, again)
            rows.append(row)
    return rows


def _number(text):
    try:
        return float(text)
    except ValueError:
        return float("nan") if text == "" else text


def write_csv(path, rows):
    """`rows` into `path` whole or not at all (written beside it, then renamed over it)."""
    part = path + ".part"
    with open(part, "w", newline="") as fh:
        # Every row's columns, in the order the rows first have them (a failed gaps has fewer).
        columns = list(dict.fromkeys(c for row in rows for c in row))
        w = csv.DictWriter(fh, fieldnames=columns, restval="")
        w.writeheader()
        w.writerows(rows)
    os.replace(part, path)


def check_cells(cells, run_cell, csv_path):
    """Each cell's row from `run_cell(f, bs)` (None: its process failed), the CSV rewritten
    after every cell, so a run cut short keeps the cells it finished. Returns 0, or 1 at the
    first failed cell."""
    rows = []
    for f, bs in cells:
        row = run_cell(f, bs)
        if row is None:
            return 1
        rows.append(row)
        write_csv(csv_path, rows)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("metaprep")
    ap.add_argument("out")
    ap.add_argument("--forward-us", type=rl.numbers(float), default="100,1000,3000")
    ap.add_argument("--batch-sizes", type=rl.numbers(int), default="1,8")
    ap.add_argument("--steps", type=int, default=60, help="untraced steps per arm")
    ap.add_argument("--rounds", type=int, default=6,
                    help="untraced rounds, the arms' order mirrored in each")
    ap.add_argument("--trace-steps", type=int, default=12)
    ap.add_argument("--loop", choices=sorted(LOOPS), default="reference",
                    help="the loop held: scripts/reference_loop.py or calibrate_torch.py's")
    ap.add_argument("--remeasure", action="store_true",
                    help="measure each cell's loop untraced once more after its trace, in a "
                         "process of its own: the measured side's spread (after_* columns)")
    ap.add_argument("--one-cell", help=argparse.SUPPRESS)  # F,BS: one cell, its row as JSON
    ap.add_argument("--untraced-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--reread", metavar="CSV",
                    help="no GPU: make the gaps columns of an earlier gaps-check.csv again from "
                         "the traces it kept in OUT, into OUT/gaps-check-reread.csv")
    args = ap.parse_args(argv)
    if args.reread:
        write_csv(os.path.join(args.out, "gaps-check-reread.csv"),
                  reread(args.metaprep, args.out, args.reread))
        return 0
    if args.one_cell:
        f, bs = args.one_cell.split(",")
        print(json.dumps(one_cell(args, float(f), int(bs))))
        return 0
    # Each cell in a process of its own: a profiler leaves its hooks behind in the process
    # it ran in, and the next trace's probes would not be bare.
    def run_cell(f, bs):
        cmd = [sys.executable, os.path.abspath(__file__), args.metaprep, args.out,
               "--steps", str(args.steps), "--rounds", str(args.rounds),
               "--trace-steps", str(args.trace_steps), "--loop", args.loop,
               "--one-cell", f"{f:g},{bs}"]
        def cell_process(*flags):
            p = subprocess.run(cmd + list(flags), stdout=subprocess.PIPE, text=True)
            if p.returncode != 0:
                print(f"f {f:g} bs {bs}: the cell's process exited {p.returncode}")
                return None
            return json.loads(p.stdout.strip().splitlines()[-1])

        # A cell whose host changed speed while it was measured (eager-sync's first and
        # second half of the rounds apart by more than DRIFT_PCT) runs once more; the
        # second is kept (its trace replaced).
        tries = []
        steady = lambda row: abs(row["eager_sync_drift_pct"]) <= DRIFT_PCT  # noqa: E731
        while len(tries) < 2 and not (tries and steady(tries[-1])):
            tries.append(cell_process())
            if tries[-1] is None:
                return None
        row = {**tries[-1], "tries": len(tries)}
        if args.remeasure:
            again = cell_process("--untraced-only")
            if again is None:
                return None
            row = with_remeasure(row, again)
            print(f"f {f:g} bs {bs}: measured again after the trace {row['after_change_pct']:+.1f}%"
                  f" (before it {row['measured_change_pct']:+.1f}%)", file=sys.stderr, flush=True)
        return row

    cells = [(f, bs) for bs in args.batch_sizes for f in args.forward_us]
    return check_cells(cells, run_cell, os.path.join(args.out, "gaps-check.csv"))


if __name__ == "__main__":
    sys.exit(main())
