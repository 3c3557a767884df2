"""Where the GPU's time goes between the host's waits, from an nsys sqlite export (session 43).
Splits the timeline at device-to-host copies (a step's download): per segment, kernels' busy time,
the idle gaps between its kernels, and the idle gap from the previous download's end to the segment's
first kernel (the host round trip). Prints means over segments grouped by kernel count."""
import sqlite3, sys, collections
db = sqlite3.connect(sys.argv[1])
names = dict(db.execute("select id, value from StringIds"))
ks = [(s, e, names.get(n, '?')) for s, e, n in db.execute(
    "select start, end, shortName from CUPTI_ACTIVITY_KIND_KERNEL order by start")]
cps = [(s, e) for s, e in db.execute(
    "select start, end from CUPTI_ACTIVITY_KIND_MEMCPY where copyKind = 2 order by start")]
print(f"{len(ks)} kernels, {len(cps)} downloads")
segs, i = [], 0
prev_end = None
for cs, ce in cps:
    seg = []
    while i < len(ks) and ks[i][0] < cs:
        seg.append(ks[i]); i += 1
    if seg and prev_end is not None:
        busy = 0; last = seg[0][0]; gaps = 0
        for s, e, n in seg:
            if s > last: gaps += s - last
            busy += min(e, cs) - max(s, last) if e > last else 0
            last = max(last, e)
        segs.append((len(seg), seg[0][0] - prev_end, busy, gaps, ce - last, ce - prev_end, tuple(n for _, _, n in seg)))
    prev_end = ce
by = collections.defaultdict(list)
for g in segs: by[g[0]].append(g)
print("kernels  count  roundtrip_us  busy_us  gaps_us  tail_us(last kernel end->download end)  total_us")
for k in sorted(by, key=lambda k: -len(by[k]))[:8]:
    L = by[k]; n = len(L)
    m = lambda j: sum(x[j] for x in L) / n / 1e3
    print(f"{k:7d} {n:6d} {m(1):12.1f} {m(2):8.1f} {m(3):8.1f} {m(4):8.1f} {m(5):9.1f}")
    if n > 50:
        c = collections.Counter(L[0][6]); print("   ", " ".join(L[0][6])[:600])
# per-kernel mean durations within the most common segment kind
k = max(by, key=lambda k: len(by[k]))
dur = collections.defaultdict(list)
for s, e, n in ks: dur[n].append(e - s)
print("kernel mean us (all):")
for n, v in sorted(dur.items(), key=lambda x: -sum(x[1]))[:25]:
    print(f"  {n[:60]:60s} {len(v):7d} {sum(v)/len(v)/1e3:7.2f}")
