#!/usr/bin/env python3
"""One line per kernel and launch shape from the CSVs scripts/ncu_prep.sh writes: the median
over its profiled launches of duration, DRAM / memory / SM throughput (% of peak), achieved
occupancy and registers. Times from ncu are cold-cache (ncu flushes caches between replay
passes) and serialised, so they are longer than the sweep's warm, back-to-back steps: read
them for what limits a kernel, not for its cost.

    python3 scripts/ncu_summary.py OUTDIR/*.csv > ncu-summary.md
"""
import collections
import csv
import statistics
import sys

METRICS = {
    "Duration": "duration",
    "DRAM Throughput": "dram",
    "Memory Throughput": "memory",
    "Compute (SM) Throughput": "sm",
    "Achieved Occupancy": "occupancy",
    "Registers Per Thread": "registers",
}
TO_US = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "nsecond": 1e-3}


def launches(path):
    """{(kernel, grid, block): [{metric: value}, ...]}, one dict per profiled launch."""
    by_launch = collections.OrderedDict()
    for row in csv.DictReader(open(path, newline="")):
        name = METRICS.get(row["Metric Name"])
        if name is None or (name == "memory" and row["Metric Unit"] != "%"):
            continue
        value = float(row["Metric Value"].replace(",", ""))
        if name == "duration":
            value *= TO_US.get(row["Metric Unit"], float("nan"))
        key = (row["ID"], row["Kernel Name"], row["Grid Size"], row["Block Size"])
        by_launch.setdefault(key, {})[name] = value
    shapes = collections.OrderedDict()
    for (_, kernel, grid, block), metrics in by_launch.items():
        shapes.setdefault((kernel, grid, block), []).append(metrics)
    return shapes


def main(paths):
    if not paths:
        sys.exit("usage: ncu_summary.py FILE.csv...")
    for path in paths:
        print(f"\n### {path}\n")
        print("| kernel | grid | block | launches | duration µs | DRAM % | memory % | SM % | occupancy % | registers |")
        print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for (kernel, grid, block), runs in launches(path).items():
            def median(name):
                values = [r[name] for r in runs if name in r]
                return statistics.median(values) if values else float("nan")
            print(f"| {kernel} | {grid} | {block} | {len(runs)} | {median('duration'):.2f} | "
                  f"{median('dram'):.1f} | {median('memory'):.1f} | {median('sm'):.1f} | "
                  f"{median('occupancy'):.1f} | {median('registers'):.0f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
