import csv,collections,sys
p=sys.argv[1]
d=collections.defaultdict(dict)
for r in csv.DictReader(open(p)):
    if r['kind']=='prep' and r['arm']=='eager-sync' and r['metric']=='host_blocked_us':
        d[(r['family'][:8],int(r['batch_size']),int(r['block_size']))][int(r['round'])]=float(r['median'])
for k in sorted(d):
    v=d[k]; m=min(v.values())
    print(f'{str(k):32s} min {m:5.1f}', ''.join('S' if v[i]>1.25*m else '.' for i in sorted(v)), ' '.join(f'{v[i]:.0f}' for i in sorted(v)))
