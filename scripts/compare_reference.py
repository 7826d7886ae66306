#!/usr/bin/env python3
"""Compare `metaprep steps` against the PyTorch reference loop of scripts/calibrate_torch.py.

    python3 scripts/compare_reference.py RUN

RUN holds `calibration/reference.csv` (or `calib/`) and the steps runs of run-on-gpu.sh's
calibrate stage, all `--tp tp1 --block-sizes 5 --arms eager-sync,eager-device,graph,graph-upload`:
* `validate-f{F}/metaprep.csv`: `--host-profile calibration/host_profile.json --forward-us F
  --batch-sizes 1,8,64`, the one profile a user would take;
* `validate-cells/f{F}-bs{B}/metaprep.csv` (where present): `--host-profile
  calibration/cells/f{F}-bs{B}.json --forward-us F --batch-sizes B`, each cell's eager op costs
  as that cell's own loop measured them.
Prints markdown for each: per-arm step time (model / loop - 1) and each arm's difference to graph.
"""
import csv
import glob
import os
import re
import sys

ARMS = ["eager-sync", "eager-device", "graph", "graph-upload"]
STEP_BAR, DIFF_BAR = 10, 15  # the validation's bars, in percent


def step_rows(path):
    """(batch size, arm) -> (median, ci_lo, ci_hi) of the step_us rows of one steps run."""
    return {(int(r["batch_size"]), r["arm"]): (float(r["median"]), float(r["ci_lo"]),
                                                float(r["ci_hi"]))
            for r in csv.DictReader(open(path)) if r["metric"] == "step_us"}


def tables(ref, model, title):
    keys = sorted({(f, bs) for f, bs, _ in model})
    print(f"### {title}\n")
    print("| forward (µs) | bs | arm | PyTorch loop step (µs, median [p10, p90]) "
          "| metaprep step (µs, median [95% CI]) | model / loop − 1 |")
    print("|---:|---:|---|---:|---:|---:|")
    ok = n = 0
    for f, bs in keys:
        for a in ARMS:
            r, m = ref[(f, bs, a)], model[(f, bs, a)]
            e = (m[0] / r[0] - 1) * 100
            n += 1
            ok += abs(e) <= STEP_BAR
            print(f"| {f:.0f} | {bs} | {a} | {r[0]:.0f} [{r[1]:.0f}, {r[2]:.0f}] "
                  f"| {m[0]:.0f} [{m[1]:.0f}, {m[2]:.0f}] | {e:+.1f}% |")
    print(f"\n{ok} of {n} cells within ±{STEP_BAR}%.\n")
    print("| forward (µs) | bs | arm | loop: arm − graph (µs) | metaprep: arm − graph (µs) "
          "| model / loop − 1 |")
    print("|---:|---:|---|---:|---:|---:|")
    ok = n = 0
    for a in ARMS[:1] + ARMS[3:] + ARMS[1:2]:
        for f, bs in keys:
            rd = ref[(f, bs, a)][0] - ref[(f, bs, "graph")][0]
            md = model[(f, bs, a)][0] - model[(f, bs, "graph")][0]
            e = (md / rd - 1) * 100
            if a == "eager-sync":
                n += 1
                ok += abs(e) <= DIFF_BAR
            print(f"| {f:.0f} | {bs} | {a} | {rd:.0f} | {md:.0f} | {e:+.1f}% |")
    print(f"\neager-sync − graph within ±{DIFF_BAR}% in {ok} of {n} cells.\n")


def main(root):
    calib = "calib" if os.path.isdir(f"{root}/calib") else "calibration"
    ref = {(float(r["forward_us"]), int(r["batch_size"]), r["arm"]):
           (float(r["step_us_median"]), float(r["step_us_p10"]), float(r["step_us_p90"]))
           for r in csv.DictReader(open(f"{root}/{calib}/reference.csv"))}
    one = {}
    for path in glob.glob(f"{root}/validate-f*/metaprep.csv"):
        f = float(re.search(r"validate-f([0-9.]+)/", path).group(1))
        one.update({(f, bs, a): v for (bs, a), v in step_rows(path).items()})
    tables(ref, one, f"One profile: {calib}/host_profile.json")
    cells = {}
    for path in glob.glob(f"{root}/validate-cells/f*-bs*/metaprep.csv"):
        f, bs = re.search(r"/f([0-9.]+)-bs(\d+)/", path).groups()
        cells.update({(float(f), b, a): v for (b, a), v in step_rows(path).items()})
    if cells:
        tables(ref, cells, f"Each cell's own in-loop op costs: {calib}/cells/f*-bs*.json")


if __name__ == "__main__":
    main(sys.argv[1])
