# What compare would call between two sweeps if each had stopped after n rounds: reads two
# rounds.csv (or .csv.gz) files, forms each prep cell's median over its first n rounds with
# the order-statistic 95% interval (as metaprep does), the read cost paired by round, and
# judges NEW/BASE - 1 by MOVER against +/-2%. Floors, floor_multiple and ratios left out.
#   python3 rounds_aa.py BASE/rounds.csv.gz NEW/rounds.csv.gz 6,12,19
import csv,collections,gzip,io,math,sys
from statistics import median
from math import comb
def ci(v):
    v=sorted(x for x in v if math.isfinite(x)); n=len(v)
    if n<6: return (math.nan,math.nan)
    cdf=0; k_last=-1
    for k in range(n//2):
        cdf+=comb(n,k)/2**n
        if cdf>0.025: break
        k_last=k
    l=k_last+1
    return v[l-1], v[n-l]
def load(path):
    d=collections.defaultdict(dict)
    f=gzip.open(path,'rt') if path.endswith('.gz') else open(path)
    for r in csv.DictReader(f):
        d[(r['kind'],r['family'],r['batch_size'],r['block_size'],r['arm'],r['metric'])][int(r['round'])]=float(r['median'])
    return d
def est(vals):
    lo,hi=ci(vals); return median(vals),lo,hi
def verdict(b,n,thr=2.0):
    mb,lb,ub=b; mn,ln_,un=n
    if not all(map(math.isfinite,[mb,lb,ub,mn,ln_,un])) or min(mb,lb,mn,ln_)<=0: return 'uncertain'
    c=math.log(mn)-math.log(mb)
    L=c-math.sqrt((math.log(mn)-math.log(ln_))**2+(math.log(ub)-math.log(mb))**2)
    U=c+math.sqrt((math.log(un)-math.log(mn))**2+(math.log(mb)-math.log(lb))**2)
    L,U=(math.exp(L)-1)*100,(math.exp(U)-1)*100
    if L>=-thr and U<=thr: return 'same'
    if L>thr: return 'slower'
    if U<-thr: return 'faster'
    return 'uncertain'
def rows(d,n):
    out={}
    for k,v in d.items():
        vals=[v[i] for i in range(1,n+1) if i in v]
        if len(vals)<6: continue
        out[k]=est(vals)
    # paired read cost and ratio
    for k in list(d):
        if k[0]=='prep' and k[4]=='eager-sync' and k[5]=='step_us':
            dev=d[k[:4]+('eager-device','step_us')]
            vals=[d[k][i]-dev[i] for i in range(1,n+1) if i in d[k] and i in dev]
            out[k[:5]+('read_cost_us',)]=est(vals)
    return out
a=load(sys.argv[1]); b=load(sys.argv[2])
for n in [int(x) for x in sys.argv[3].split(',')]:
    ra,rb=rows(a,n),rows(b,n)
    cnt=collections.Counter(); bym=collections.defaultdict(collections.Counter)
    for k in ra:
        if k in rb and k[0]=='prep':
            v=verdict(ra[k],rb[k]); cnt[v]+=1; bym[(k[4],k[5])][v]+=1
    tot=sum(cnt.values())
    print(f'n={n}: {dict(cnt)} flagged {100*(cnt["slower"]+cnt["faster"])/tot:.1f}% of {tot}')
    for m,c in sorted(bym.items()):
        if c['slower']+c['faster']: print('   ',m,dict(c))
