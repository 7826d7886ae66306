# Share of (cell, round) pairs in which eager-sync's host read blocked more than 1.25x the
# cell's fastest round (the slow-read state), and DSA decode bs 8 block 5's rounds.
#   python3 slow_read_rounds.py RUN/rounds.csv[.gz] ...
import csv,collections,gzip,sys
def load(p):
    f=gzip.open(p,'rt') if p.endswith('.gz') else open(p)
    d=collections.defaultdict(dict)
    for r in csv.DictReader(f):
        if r['kind']=='prep' and r['arm']=='eager-sync' and r['metric']=='host_blocked_us':
            d[(r['family'],r['batch_size'],r['block_size'])][int(r['round'])]=float(r['median'])
    return d
for p in sys.argv[1:]:
    d=load(p); hi=0; tot=0
    for k,v in d.items():
        m=min(v.values())
        for x in v.values():
            tot+=1; hi+= x>1.25*m
    dec=d.get(('dsa_decode','8','5'),{})
    print(p, f'rounds with eager-sync blocked >1.25x the cell minimum: {hi}/{tot} ({100*hi/tot:.0f}%)', 'decode bs8 b5:', ' '.join(f'{dec[i]:.0f}' for i in sorted(dec)))
