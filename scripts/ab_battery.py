#!/usr/bin/env python3
"""Hold `metaprep ab`'s gate to this GPU host: A/A runs, a planted host-side slowdown and a
planted GPU-side one, interleaved in time so each kind sees the host's states alike.

    python3 scripts/ab_battery.py METAPREP OUT [--runs N] [--budget-s S] [--kinds aa,host,gpu]
                                 [--other-build PATH] [--first N] [--ab-flags "..."]

Kinds (each `metaprep ab` on its default small grid):
  aa     the same build as BASE and NEW: passes when it exits 0 and calls no row;
  host   NEW with --plant-host eager-sync=20%: passes when it exits 1, calls every eager-sync
         step_us row slower and calls no row of another arm (the read cost is eager-sync's);
  gpu    NEW with --forward-us 21 (BASE 20, +1 us of stand-in forward): passes when it exits 1
         and calls every graph and fused step_fwd_us row slower, and no row but step_fwd_us;
  twobin BASE --other-build, NEW METAPREP, no plant: an A/A across two builds.

Writes OUT/battery.csv (a line per run, as it goes) and OUT/runs/<kind>-<n>/ (each run's
folder), and prints a table per kind. Stops starting runs once --budget-s has passed. Where
OUT/battery.csv exists, the runs it holds are kept and not run again (a battery spread over
several sittings).
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time

KINDS = {
    "aa": [],
    "host": ["--new-flags", "--plant-host eager-sync=20%"],
    "gpu": ["--new-flags", "--forward-us 21"],
    "twobin": [],
}


def called_rows(report):
    """(arm, metric, call) of every row called slower or faster."""
    return [
        (r["cell"]["arm"], r["metric"], r["call"])
        for r in report["rows"]
        if r["call"] in ("slower", "faster")
    ]


def judge(kind, exit_code, report):
    """Whether a run of `kind` came out as it should, and why not."""
    if report is None:
        return False, f"no ab.json (exit {exit_code})"
    calls = called_rows(report)
    if kind in ("aa", "twobin"):
        ok = exit_code == 0 and not calls
        return ok, "" if ok else f"exit {exit_code}, called {calls}"
    if kind == "host":
        want = [
            r for r in report["rows"] if r["cell"]["arm"] == "eager-sync" and r["metric"] == "step_us"
        ]
        missed = [r["cell"]["family"] + f" bs {r['cell']['batch_size']}" for r in want if r["call"] != "slower"]
        stray = [c for c in calls if c[0] not in ("eager-sync", "eager-sync - eager-device")]
        ok = exit_code == 1 and not missed and not stray
        return ok, "" if ok else f"exit {exit_code}, missed {missed}, stray {stray}"
    if kind == "gpu":
        want = [
            r
            for r in report["rows"]
            if r["cell"]["arm"] in ("graph", "fused") and r["metric"] == "step_fwd_us"
        ]
        missed = [f"{r['cell']['family']}/{r['cell']['arm']} bs {r['cell']['batch_size']}" for r in want if r["call"] != "slower"]
        stray = [c for c in calls if c[1] != "step_fwd_us"]
        ok = exit_code == 1 and not missed and not stray
        return ok, "" if ok else f"exit {exit_code}, missed {missed}, stray {stray}"
    raise ValueError(kind)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("metaprep")
    ap.add_argument("out")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--first", type=int, default=1, help="the first run's number (its seed)")
    ap.add_argument("--budget-s", type=float, default=1e9)
    ap.add_argument("--kinds", default="aa,host,gpu")
    ap.add_argument("--other-build")
    ap.add_argument("--ab-flags", default="", help="more flags for every `metaprep ab`")
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    started = time.time()
    path = os.path.join(args.out, "battery.csv")
    header = ["kind", "run", "exit", "seconds", "ok", "why", "called", "redone", "state_split_at_us"]
    lines = []
    if os.path.exists(path):
        with open(path, newline="") as f:
            lines = [[r[0], int(r[1]), *r[2:4], r[4] == "True", *r[5:]] for r in list(csv.reader(f))[1:]]
    done = {(r[0], r[1]) for r in lines}
    with open(path, "a" if lines else "w", newline="") as f:
        w = csv.writer(f)
        if not lines:
            w.writerow(header)
        for n in range(args.first, args.first + args.runs):
            for kind in kinds:
                if (kind, n) in done:
                    continue
                if time.time() - started > args.budget_s:
                    break
                folder = os.path.join(args.out, "runs", f"{kind}-{n}")
                sides = [args.other_build, args.metaprep] if kind == "twobin" else []
                cmd = [args.metaprep, "ab", *sides, "--seed", str(n), "--out", folder, *KINDS[kind],
                       *args.ab_flags.split()]
                t = time.time()
                try:
                    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                    code, err = p.returncode, p.stderr
                except subprocess.TimeoutExpired:
                    code, err = -9, "timed out"
                seconds = time.time() - t
                path = os.path.join(folder, "ab.json")
                report = json.load(open(path)) if os.path.exists(path) else None
                ok, why = judge(kind, code, report)
                if report is None:
                    why += "; " + err.strip().splitlines()[-1] if err.strip() else ""
                calls = called_rows(report) if report else []
                row = [kind, n, code, f"{seconds:.1f}", ok, why, len(calls),
                       report["redone"] if report else "", report.get("state_split_at_us") if report else ""]
                w.writerow(row)
                f.flush()
                lines.append(row)
                print(" ".join(str(x) for x in row), flush=True)
    print("\nkind    runs  as-it-should  median s")
    for kind in kinds:
        of = [r for r in lines if r[0] == kind]
        if of:
            secs = sorted(float(r[3]) for r in of)
            print(f"{kind:7} {len(of):5} {sum(1 for r in of if r[4]):13} {secs[len(secs) // 2]:9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
