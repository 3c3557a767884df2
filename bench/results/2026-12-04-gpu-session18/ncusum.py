import csv, sys, collections
# sums ncu --csv gpu__time_duration.sum per kernel name (ns), prints µs total / count / mean
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in csv.DictReader(rows):
    if r.get("Metric Name") != "gpu__time_duration.sum": continue
    k = r["Kernel Name"].split("(")[0].split("<")[0][:40]
    tot[k] += float(r["Metric Value"].replace(",", "")) / 1e3; cnt[k] += 1
s = sum(tot.values())
print(f"{sys.argv[1]}: {sum(cnt.values())} kernels, {s:.1f} us")
for k, v in sorted(tot.items(), key=lambda x: -x[1])[:14]:
    print(f"  {k:40s} {v:8.1f} us  x{cnt[k]:4d}  {v/cnt[k]:6.2f}")
