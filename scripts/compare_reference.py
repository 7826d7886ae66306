#!/usr/bin/env python3
"""Compare `metaprep steps` against the PyTorch reference loop of scripts/calibrate_torch.py.

    python3 scripts/compare_reference.py RUN

RUN holds `calib/reference.csv` (or `calibration/reference.csv`) and `validate-f{100,1000,5000}/
metaprep.csv` from `metaprep steps --host-profile RUN/calib/host_profile.json --forward-us F
--tp tp1 --batch-sizes 1,8,64 --block-sizes 5 --arms eager-sync,eager-device,graph,graph-upload`.
Prints markdown: per-arm step time (model / loop - 1) and each arm's difference to graph.
"""
import csv
import os
import sys

root = sys.argv[1]
calib = "calib" if os.path.isdir(f"{root}/calib") else "calibration"
ref = {}
for r in csv.DictReader(open(f'{root}/{calib}/reference.csv')):
    ref[(float(r['forward_us']), int(r['batch_size']), r['arm'])] = (float(r['step_us_median']), float(r['step_us_p10']), float(r['step_us_p90']))
model = {}
for f in (100, 1000, 5000):
    for r in csv.DictReader(open(f'{root}/validate-f{f}/metaprep.csv')):
        if r['metric'] == 'step_us':
            model[(float(f), int(r['batch_size']), r['arm'])] = (float(r['median']), float(r['ci_lo']), float(r['ci_hi']))
arms = ['eager-sync', 'eager-device', 'graph', 'graph-upload']
print("| forward (µs) | bs | arm | PyTorch loop step (µs, median [p10, p90]) | metaprep step (µs, median [95% CI]) | model / loop − 1 |")
print("|---:|---:|---|---:|---:|---:|")
worst = 0; n_ok = 0; n = 0
for f in (100., 1000., 5000.):
    for bs in (1, 8, 64):
        for a in arms:
            k = (f, bs, a); r = ref[k]; m = model[k]
            e = (m[0] / r[0] - 1) * 100; n += 1; n_ok += abs(e) <= 10
            print(f"| {f:.0f} | {bs} | {a} | {r[0]:.0f} [{r[1]:.0f}, {r[2]:.0f}] | {m[0]:.0f} [{m[1]:.0f}, {m[2]:.0f}] | {e:+.1f}% |")
print(f"\n{n_ok} of {n} cells within ±10%.\n")
print("| forward (µs) | bs | arm | loop: arm − graph (µs) | metaprep: arm − graph (µs) | model / loop − 1 |")
print("|---:|---:|---|---:|---:|---:|")
d_ok = 0; dn = 0
for a in ['eager-sync', 'eager-device', 'graph-upload']:
  for f in (100., 1000., 5000.):
    for bs in (1, 8, 64):
        rd = ref[(f, bs, a)][0] - ref[(f, bs, 'graph')][0]
        md = model[(f, bs, a)][0] - model[(f, bs, 'graph')][0]
        e = (md / rd - 1) * 100
        if a == 'eager-sync': dn += 1; d_ok += abs(e) <= 15
        print(f"| {f:.0f} | {bs} | {a} | {rd:.0f} | {md:.0f} | {e:+.1f}% |")
print(f"\neager-sync − graph within ±15% in {d_ok} of {dn} cells.")
