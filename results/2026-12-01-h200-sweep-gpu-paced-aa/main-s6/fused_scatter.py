#!/usr/bin/env python3
"""Why fused's GPU-paced rows stay wide: its round medians against the timer's grid, the
drift all cells of an arm share round by round, and how that drift follows the floors.

    python3 fused_scatter.py aa1 aa2      (run folders holding rounds-gpu-paced-arms.csv.gz)
"""
import collections, csv, gzip, statistics as st, sys


def corr(a, b):
    ma, mb = st.mean(a), st.mean(b)
    num = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    den = (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5
    return num / den if den else 0.0


for run in sys.argv[1:]:
    cells, floors = collections.defaultdict(dict), collections.defaultdict(dict)
    for r in csv.DictReader(gzip.open(f"{run}/rounds-gpu-paced-arms.csv.gz", "rt")):
        key = (r["family"], r["arm"], r["batch_size"], r["block_size"], r["layout"], r["metric"])
        (cells if r["kind"] == "prep" else floors)[key][int(r["round"])] = float(r["median"])
    for arm in ("fused", "graph", "graph-upload"):
        for metric in ("gpu_prep_us", "step_us"):
            keys = [k for k in cells if k[1] == arm and k[5] == metric]
            values = [v for k in keys for v in cells[k].values()]
            on_grid = sum(abs(v * 1000 / 32 - round(v * 1000 / 32)) < 0.02 for v in values)
            sds = [st.pstdev(cells[k].values()) / st.median(cells[k].values()) for k in keys]
            by_round = collections.defaultdict(list)
            for k in keys:
                med = st.median(cells[k].values())
                for rnd, v in cells[k].items():
                    by_round[rnd].append(v / med - 1)
            factor = {rnd: st.mean(v) for rnd, v in by_round.items() if len(v) >= len(keys) // 2}
            follows = []
            for fk, series in floors.items():
                if fk[5] != "step_us":
                    continue
                common = sorted(set(factor) & set(series))
                if len(common) >= 10:
                    follows.append(f"{fk[1]} {corr([factor[r] for r in common], [series[r] for r in common]):+.2f}")
            print(f"{run} {arm} {metric}: {len(keys)} cells; round medians on the 32 ns grid "
                  f"{100 * on_grid / max(len(values), 1):.0f}%; sd of round medians (median over cells) "
                  f"{100 * st.median(sds):.2f}%; the round factor all cells share: sd "
                  f"{100 * st.pstdev(factor.values()):.2f}% over {len(factor)} rounds")
            print("    it follows the floors:", ", ".join(follows))
