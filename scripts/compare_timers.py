#!/usr/bin/env python3
"""Put two `metaprep steps` runs of one grid side by side: one timed with `--timer events`,
one with `--timer cupti`.

    python3 scripts/compare_timers.py EVENTS_RUN CUPTI_RUN [--out FILE]

Prints (or writes to FILE) a markdown table per cell and arm: occupancy and gap_us (median
[95% CI]) from each timer's timeline pass, and step_us from each run's clean passes. The
timeline figures differ by design (events: one span per GPU phase, from where its work
begins to its last kernel's end; CUPTI: every kernel, copy and memset its own span, host
phases' framework kernels and the read's copy included); step_us should not, unless CUPTI's
presence slows the clean passes. Standard library only: runs on the GPU host as is.
"""
import argparse
import csv
import os
import sys

METRICS = ("occupancy", "gap_us", "step_us")


def load(run):
    path = os.path.join(run, "metaprep.csv")
    if not os.path.isfile(path):
        sys.exit(f"compare_timers: {path} not found: give a `metaprep steps --out` folder")
    rows = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["kind"] != "step" or row["metric"] not in METRICS:
                continue
            key = (row["family"], row["layout"], int(row["batch_size"]), int(row["block_size"]), row["arm"])
            rows[(key, row["metric"])] = row
    if not rows:
        sys.exit(f"compare_timers: {path} holds no step rows: is it a `metaprep steps` run?")
    return rows


def cell(row, metric):
    if row is None:
        return "–"
    digits = 3 if metric == "occupancy" else 1
    value = f"{float(row['median']):.{digits}f}"
    lo, hi = row.get("ci_lo", ""), row.get("ci_hi", "")
    if lo not in ("", "NaN", "nan") and hi not in ("", "NaN", "nan"):
        value += f" [{float(lo):.{digits}f}, {float(hi):.{digits}f}]"
    return value


def table(events, cupti):
    keys = sorted({k for k, _ in events} | {k for k, _ in cupti})
    lines = [
        "| family | layout | bs | block | arm | occupancy, events | occupancy, CUPTI "
        "| gap_us, events | gap_us, CUPTI | step_us, events run | step_us, CUPTI run |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key in keys:
        family, layout, bs, block, arm = key
        values = []
        for metric in METRICS:
            values += [cell(events.get((key, metric)), metric), cell(cupti.get((key, metric)), metric)]
        lines.append(f"| {family} | {layout} | {bs} | {block} | {arm} | " + " | ".join(values) + " |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("events_run")
    parser.add_argument("cupti_run")
    parser.add_argument("--out", help="write the table here instead of printing it")
    args = parser.parse_args()
    text = (
        f"Timeline figures of `{args.events_run}` (--timer events) and "
        f"`{args.cupti_run}` (--timer cupti), median [95% CI].\n\n"
        + table(load(args.events_run), load(args.cupti_run))
    )
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.out)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
