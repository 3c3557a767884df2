#!/usr/bin/env python3
# bench/q8_correction_accuracy.py MODEL_WEIGHT [ROWS] — run from the repo root with ../shared beside it (bench/zen.md,
# "Session 45"). Pure Python (no numpy), minutes for a few hundred rows.
# Accuracy of three ways to form x·w for bf16 w and fp32 x (pure Python, double reference):
#  hilo: bf16(x) + bf16(x - bf16(x)) against exact w (the CPU prefill today)
#  hi:   bf16(x) only (one vdpbf16ps per 32 products)
#  q8c:  bf16(x)·w + the correction lo·w with w and lo as int8 (per-row / per-group scales; VNNI)
import json, struct, math, random, sys
d='../shared/models/qwen35-small-code/'
idx=json.load(open(d+'model.safetensors.index.json'))['weight_map']
def load(name):
    f=open(d+idx[name],'rb'); n=struct.unpack('<Q',f.read(8))[0]; h=json.loads(f.read(n))
    m=h[name]; a,b=m['data_offsets']; f.seek(8+n+a); raw=f.read(b-a)
    vals=[struct.unpack('<f',struct.pack('<I',u<<16))[0] for u in struct.unpack('<%dH'%(len(raw)//2),raw)]
    R,C=m['shape']; return [vals[r*C:(r+1)*C] for r in range(R)]
def bf16(v):  # round to nearest even
    u=struct.unpack('<I',struct.pack('<f',v))[0]; u=(u+0x7fff+((u>>16)&1))&0xffff0000
    return struct.unpack('<f',struct.pack('<I',u))[0]
def f32(v): return struct.unpack('<f',struct.pack('<f',v))[0]
W=load(sys.argv[1]); rows=int(sys.argv[2]) if len(sys.argv)>2 else 256
emb=load('model.embed_tokens.weight'); K=len(W[0])
random.seed(1)
X=[]
for t in range(6):  # rmsnormed rows at K inputs (embedding rows tiled / random mix)
    e=[emb[random.randrange(len(emb))][i%len(emb[0])]*(1+0.3*random.random()) for i in range(K)]
    s=math.sqrt(sum(v*v for v in e)/K+1e-6); X.append([f32(v/s) for v in e])
G=32
res={'hilo':[], 'hi':[], 'q8row':[], 'q8g32':[]}
for x in X:
    hi=[bf16(v) for v in x]; lo=[bf16(v-h) for v,h in zip(x,hi)]
    lr=[v-h for v,h in zip(x,hi)]  # exact residual (for the int8 path)
    slo=max(abs(v) for v in lr)/127 or 1
    qlo=[round(v/slo) for v in lr]
    for r in range(min(rows,len(W))):
        w=W[r]; ex=sum(a*b for a,b in zip(w,x)); mag=sum(abs(a*b) for a,b in zip(w,x)) or 1
        dh=sum(a*b for a,b in zip(w,hi)); dl=sum(a*b for a,b in zip(w,lo))
        sw=max(abs(v) for v in w)/127 or 1; qw=[round(v/sw) for v in w]
        c_row=sw*slo*sum(a*b for a,b in zip(qw,qlo))
        c_g=0.0
        for g in range(0,K,G):
            sg=max(abs(v) for v in w[g:g+G])/127 or 1
            c_g+=sg*slo*sum(round(w[i]/sg)*qlo[i] for i in range(g,g+G))
        res['hilo'].append(abs(dh+dl-ex)/mag); res['hi'].append(abs(dh-ex)/mag)
        res['q8row'].append(abs(dh+c_row-ex)/mag); res['q8g32'].append(abs(dh+c_g-ex)/mag)
for k,v in res.items():
    v.sort(); print("%-6s rel err (÷Σ|w·x|): median %.2e  p99 %.2e  max %.2e" % (k, v[len(v)//2], v[int(len(v)*.99)], v[-1]))
