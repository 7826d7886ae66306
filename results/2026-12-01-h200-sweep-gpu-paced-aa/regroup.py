"""A sweep's GPU-paced arms' host_issue_us rows (and their per-host-speed twins) rebuilt from
their group's rounds only, as runs/sweep_rounds/group.rs keeps them since f8b99b0, from the
run's own round medians (rounds-host-issue.csv.gz) with stats/summary.rs's interval (the
order-statistic 95% interval of the median over the rounds' medians). Rebuilt with each row's
own rounds, it reproduces all 144 such rows of aa1 exactly.

    python3 regroup.py aa1 regrouped/aa1 && python3 regroup.py aa2 regrouped/aa2
    metaprep compare regrouped/aa1 regrouped/aa2
"""
import collections, csv, gzip, math, os, sys

CONFIDENCE = 0.95


def ci_ranks(n):  # stats/summary.rs median_ci_ranks
    max_tail, ln_half, ln_choose, cdf, lo = (1 - CONFIDENCE) / 2, -n * math.log(2), 0.0, 0.0, 1
    for k in range(n // 2):
        cdf += math.exp(ln_choose + ln_half)
        if cdf > max_tail:
            break
        lo = k + 1
        ln_choose += math.log(n - k) - math.log(k + 1)
    return lo, n + 1 - lo


def quantile(s, p):  # type 7
    h = (len(s) - 1) * p
    f = math.floor(h)
    c = min(f + 1, len(s) - 1)
    return s[f] + (h - f) * (s[c] - s[f])


def summarize(values):
    s = sorted(v for v in values if math.isfinite(v))
    lo, hi = ci_ranks(len(s))
    ci = (s[lo - 1], s[hi - 1]) if len(s) >= 6 else (math.nan, math.nan)
    return quantile(s, 0.5), ci[0], ci[1], len(s)


def main(src, dst):
    os.makedirs(dst, exist_ok=True)
    medians = collections.defaultdict(dict)
    with gzip.open(os.path.join(src, "rounds-host-issue.csv.gz"), "rt") as f:
        for r in csv.DictReader(f):
            key = (r["family"], r["arm"], r["batch_size"], r["block_size"], r["metric"])
            medians[key][int(r["round"])] = float(r["median"])
    host_ref = medians[("floor", "host-ref", "1", "1", "step_us")]
    with gzip.open(os.path.join(src, "metaprep.csv.gz"), "rt") as f:
        rows = list(csv.DictReader(f))
    # A group's own rounds: those its host-paced arms (eager-sync among them) measured.
    group_rounds = {(r["family"], r["batch_size"], r["block_size"]): int(r["rounds"])
                    for r in rows if r["kind"] == "prep" and r["arm"] == "eager-sync"
                    and r["metric"] == "step_us"}
    rebuilt = 0
    for r in rows:
        if (r["kind"] != "prep" or r["arm"] not in ("graph", "graph-upload", "fused")
                or r["metric"] not in ("host_issue_us", "host_issue_us_per_host_ref")):
            continue
        cell = (r["family"], r["batch_size"], r["block_size"])
        n = group_rounds[cell]
        own = medians[(r["family"], r["arm"], r["batch_size"], r["block_size"], "host_issue_us")]
        if r["metric"] == "host_issue_us":
            values = [own[i] for i in range(1, n + 1)]
        else:  # the twin: each round's host issue over that round's host reference
            values = [own[i] / host_ref[i] for i in range(1, n + 1)]
        median, lo, hi, rounds = summarize(values)
        r.update(median=repr(median), ci_lo=repr(lo), ci_hi=repr(hi), rounds=str(rounds))
        if r["metric"] == "host_issue_us":
            r["stop_reason"] = next(x["stop_reason"] for x in rows if x["kind"] == "prep"
                                    and x["arm"] == "eager-sync" and x["metric"] == "step_us"
                                    and (x["family"], x["batch_size"], x["block_size"]) == cell)
        rebuilt += 1
    with gzip.open(os.path.join(dst, "metaprep.csv.gz"), "wt", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(src, "env.json")) as f, open(os.path.join(dst, "env.json"), "w") as g:
        g.write(f.read())
    print(f"{src}: {rebuilt} rows rebuilt from their group's rounds")


if __name__ == "__main__":
    main(*sys.argv[1:3])
