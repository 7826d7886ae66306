import csv,collections,sys
for p in sys.argv[1:]:
    d=collections.defaultdict(dict)
    for r in csv.DictReader(open(p)):
        if r['kind']=='prep' and r['arm']=='eager-sync' and r['metric']=='host_blocked_us':
            d[(r['family'],r['batch_size'],r['block_size'])][int(r['round'])]=float(r['median'])
    per=collections.defaultdict(lambda:[0,0])
    for k,v in d.items():
        m=min(v.values())
        for i,x in v.items():
            per[i][1]+=1; per[i][0]+= x>1.25*m
    print(p.split('/')[0], ' '.join(f'{per[i][0]}/{per[i][1]}' for i in sorted(per)))
