"""Issue 12's bars on a default sweep: fused step_us <= graph step_us in every cell, and fused
step_us within 1.5x of the one-node empty-graph floor at batch <= 64 (same run).
    python3 fused_bars.py RUN_DIR [RUN_DIR ...]"""
import csv, sys
for run in sys.argv[1:]:
    rows = list(csv.DictReader(open(run + '/metaprep.csv')))
    floor = next(float(r['median']) for r in rows
                 if r['kind'] == 'floor' and r['arm'] == 'empty-graph' and r['metric'] == 'step_us')
    step = {(r['family'], int(r['batch_size']), int(r['block_size']), r['layout'], r['arm']): float(r['median'])
            for r in rows if r['kind'] == 'prep' and r['metric'] == 'step_us'}
    cells = sorted({k[:4] for k in step if k[4] == 'fused'})
    le = [c for c in cells if step[c + ('fused',)] <= step[c + ('graph',)]]
    small = [c for c in cells if c[1] <= 64]
    within = [c for c in small if step[c + ('fused',)] <= 1.5 * floor]
    print(f"{run}: empty graph {floor:.2f} us; fused <= graph in {len(le)} of {len(cells)} cells; "
          f"fused within 1.5x of it at bs <= 64 in {len(within)} of {len(small)}")
    worst = sorted(small, key=lambda c: -step[c + ('fused',)] / floor)[:3]
    for c in worst:
        print(f"   worst: {c[0]} bs {c[1]} block {c[2]} fused {step[c + ('fused',)]:.2f} us = {step[c + ('fused',)] / floor:.2f}x")
    for c in cells:
        if c not in le:
            print(f"   fused > graph: {c} fused {step[c + ('fused',)]:.2f} graph {step[c + ('graph',)]:.2f}")
