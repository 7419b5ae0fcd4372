import csv,sys
def fit(xs,ys):
    n=len(xs);mx=sum(xs)/n;my=sum(ys)/n
    sxx=sum((x-mx)**2 for x in xs);sxy=sum((x-mx)*(y-my) for x,y in zip(xs,ys))
    b=sxy/sxx if sxx else 0;a=my-b*mx
    res=[y-(a+b*x) for x,y in zip(xs,ys)]
    return b,max(res)-min(res),(sum(r*r for r in res)/n)**.5
for f in sys.argv[1:]:
    rows=list(csv.DictReader(open(f)))
    t=[float(r['t_ms']) for r in rows]
    print(f, "samples",len(rows),"span ms %.0f"%(t[-1]-t[0]))
    for col in ('q_minus_mono','q_minus_real'):
        nr=[r for r in rows if int(r['width_ns'])<20000]
        tt=[float(r['t_ms']) for r in nr]
        y=[int(r[col]) for r in nr]; y0=y[0]; y=[v-y0 for v in y]
        # only narrow brackets (< 20 us)
        b,rng,sd=fit(tt,y)
        print("  narrow brackets:",len(nr))
        print("  %-13s range %8.1f us  slope %8.1f ppm  resid range %7.1f us sd %6.1f us"%(col,(max(y)-min(y))/1e3,b/1e3*1e3,rng/1e3,sd/1e3))
    for col in ('start_minus_q','submit_minus_q','dur','width_ns'):
        y=sorted(int(r[col]) for r in rows); n=len(y)
        print("  %-13s min %9.1f med %9.1f p99 %9.1f max %9.1f us"%(col,y[0]/1e3,y[n//2]/1e3,y[int(n*.99)]/1e3,y[-1]/1e3))
    # start against the enqueue's begin, end against the wait's return, using the median Q offset of each clock
    for ck in ('mono','real'):
        qo=sorted(int(r['q_minus_'+ck]) for r in rows)[len(rows)//2]
        early=[-(int(r['start_minus_%s0'%ck])-qo) for r in rows]  # >0: start before enqueue began
        late=[int(r['end_minus_%s2'%ck])-qo for r in rows]         # >0: end after wait returned
        print("  %s, median Q offset: start before enqueue in %d (max %.1f us); end after wait in %d (max %.1f us)"%(ck,sum(e>0 for e in early),max(early)/1e3,sum(l>0 for l in late),max(late)/1e3))
