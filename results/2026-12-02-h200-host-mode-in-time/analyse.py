#!/usr/bin/env python3
"""The tables of this folder's README, from its two CSVs: python3 analyse.py (no arguments).

A process (memory-walk) or a round (one-process) is in the launch path's slow state when its
fused host_issue_us is above 1.6 us, fast below 1.5 us (the two states of issue 25's runs:
1.2-1.4 against 1.7-2.1 us); between them it is left out of both."""
import csv, gzip, math, os, statistics as st

HERE = os.path.dirname(os.path.abspath(__file__))
FUSED = "fused:host_issue_us"
OTHERS = ["eager-pinned:host_issue_us", "empty-graph:step_us", "empty-kernel:step_us",
          "host-ref:step_us", "fused:step_us", "fused:gpu_prep_us"]


def load(path):
    with gzip.open(os.path.join(HERE, path), "rt") as f:
        rows = list(csv.DictReader(f))
    # Rows of a GPU-paced arm's own rounds lack the host-paced columns: only whole rows count.
    return [r for r in rows if all(r[k] for k in [FUSED] + OTHERS)]


def corr(x, y):
    mx, my = st.mean(x), st.mean(y)
    sx = math.sqrt(sum((a - mx) ** 2 for a in x))
    sy = math.sqrt(sum((b - my) ** 2 for b in y))
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / (sx * sy)


def states(rows):
    slow = [r for r in rows if float(r[FUSED]) > 1.6]
    fast = [r for r in rows if float(r[FUSED]) < 1.5]
    return slow, fast


def table(rows, what):
    slow, fast = states(rows)
    print(f"  {len(rows)} {what}: {len(slow)} slow, {len(fast)} fast")
    print("  | column | r with fused host_issue_us | slow median | fast median | slow / fast |")
    print("  |---|---:|---:|---:|---:|")
    fused = [float(r[FUSED]) for r in rows]
    for k in [FUSED] + OTHERS:
        s = st.median(float(r[k]) for r in slow)
        f = st.median(float(r[k]) for r in fast)
        r = corr(fused, [float(r[k]) for r in rows])
        print(f"  | {k} | {r:+.2f} | {s:.3f} | {f:.3f} | {100 * (s / f - 1):+.0f}% |")


def over(rows, row, ref):
    slow, fast = states(rows)
    s = st.median(float(r[row]) / float(r[ref]) for r in slow)
    f = st.median(float(r[row]) / float(r[ref]) for r in fast)
    return 100 * (s / f - 1)


walk = load("memory-walk/per-process.csv.gz")
print("memory-walk: per worker process (median of its round medians)")
for ref in ["256KiB", "8MiB", "64MiB"]:
    print(f"host reference chasing {ref}:")
    table([r for r in walk if r["reference"] == ref], "processes")

one = load("one-process/per-round.csv.gz")
print("one-process: per round")
for p in ["1", "12"]:
    print(f"sweeps with --processes {p}: the state of each round, in order")
    both = 0
    for sweep in sorted({int(r["sweep"]) for r in one}):
        rounds = sorted((r for r in one if r["processes"] == p and int(r["sweep"]) == sweep),
                        key=lambda r: int(r["round"]))
        marks = "".join("S" if float(r[FUSED]) > 1.6 else "f" if float(r[FUSED]) < 1.5 else "?"
                        for r in rounds)
        print(f"  sweep {sweep:2d}: {marks}")
        both += "S" in marks and "f" in marks
    print(f"  {both} sweeps had rounds in both states")
table(one, "rounds (both kinds of sweep)")
print("  a row over the same round's reference, slow / fast:")
for row in [FUSED, "eager-pinned:host_issue_us"]:
    cells = [f"{ref.split(':')[0]} {over(one, row, ref):+.0f}%"
             for ref in ["empty-graph:step_us", "empty-kernel:step_us", "host-ref:step_us"]]
    print(f"  {row} over: " + ", ".join(cells))
