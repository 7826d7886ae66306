import csv,sys
for p in sys.argv[1:]:
    rows=list(csv.DictReader(open(p+'/metaprep.csv')))
    ceil=[float(r['median']) for r in rows if r['kind']=='floor' and r['arm']=='d2d-copy' and r['metric']=='gb_s'][0]
    out=[]
    for fam in ('dsa_target_verify','dsa_draft_extend_v2','dsa_decode'):
        for arm in ('fused','graph'):
            g=[float(r['median']) for r in rows if r['kind']=='prep' and r['family']==fam and r['arm']==arm and r['metric']=='gb_s']
            out.append(f'{fam[4:10]}/{arm[:2]} {100*g[0]/ceil:5.1f}%')
    print(p.split('/')[-1], f'ceil {ceil:.0f}', ' | '.join(out))
