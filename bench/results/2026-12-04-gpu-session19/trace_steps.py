# trace_steps.py TRACE...: median step ms and gaps of a serve MTPLX_SCHED_TRACE file (8 sequences x 1 MTP row, 1 x 1, trunk 8 x 4 and 1 x 5 rows)
import sys, statistics as st
for f in sys.argv[1:]:
    m8=[];g8=[];m1=[];t32=[];t5=[];gh=[]
    for l in open(f):
        if l.startswith('#'): continue
        x=l.split(); gap=float(x[1]); tn,tr,tms=int(x[4]),int(x[5]),float(x[7]); mn,mr,mms=int(x[9]),int(x[10]),float(x[12])
        if tn==0 and mn==8 and mr==8: m8.append(mms); g8.append(gap)
        if tn==0 and mn==8 and mr>8: gh.append(gap)
        if tn==0 and mn==1 and mr==1: m1.append(mms)
        if tn==8 and tr==32: t32.append(tms)
        if tn==1 and tr==5: t5.append(tms)
    md=lambda a: st.median(a) if a else float('nan')
    print(f"{f}: 8x1 MTP {md(m8):.3f} ({len(m8)}) gap {md(g8):.3f}, gap after trunk {md(gh):.3f} | 1x1 MTP {md(m1):.3f} ({len(m1)}) | trunk 8x4 {md(t32):.3f} ({len(t32)}) 1x5 {md(t5):.3f}")
