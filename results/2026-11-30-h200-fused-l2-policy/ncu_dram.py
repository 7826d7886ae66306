"""Per-launch DRAM bytes and L2 hit rate of dsa_fused from `ncu --csv --page raw` files
(call10.sh): median over the profiled launches.
    python3 ncu_dram.py call10/ncu-*.csv.gz"""
import csv, gzip, statistics, sys
print("| file | launches | duration µs | DRAM read MB | DRAM written MB | L2 hit % |")
print("|---|---:|---:|---:|---:|---:|")
for path in sys.argv[1:]:
    rows = list(csv.reader((gzip.open if path.endswith('.gz') else open)(path, 'rt')))
    head = next(r for r in rows if 'Kernel Name' in r)
    col = {h: i for i, h in enumerate(head)}
    runs = [r for r in rows if len(r) == len(head) and r[col['Kernel Name']] == 'dsa_fused']
    num = lambda r, m: float(r[col[m]].replace(',', ''))
    med = lambda m: statistics.median(num(r, m) for r in runs)
    print(f"| {path.split('/')[-1]} | {len(runs)} | {med('gpu__time_duration.sum') / 1e3:.1f} | "
          f"{med('dram__bytes_read.sum') / 1e6:.1f} | {med('dram__bytes_write.sum') / 1e6:.1f} | "
          f"{med('lts__t_sector_hit_rate.pct'):.1f} |")
