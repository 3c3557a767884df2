# session 43, call 3 (warm): each kernel's own GPU time (ncu, serialized, caches kept: --cache-control none) in a D8@0.4 run of the embedded
# model, where 1-row draft steps of 13 launches dominate: is a draft step's 76 us the kernels or the links?
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/build.txt 2>&1
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --print-summary per-kernel"
timeout 400 $NCU build/mtplx bench --device cuda --prompts 1 --max-tokens 64 --repeats 1 --depths 8@0.4 --temperature 0.6 > $OUT/ncu-d8.txt 2>&1
echo "[$(el) s] ncu rc=$?"
python3 - $OUT/ncu-d8.txt <<'PY' | tee $OUT/ncu-d8-summary.txt
import re, sys
name = None; rows = []
cur = {}
for line in open(sys.argv[1]):
    m = re.match(r"^  (\S.*?) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\).*Invocations", line) or re.match(r"^  (\S.*)$", line)
    if line.startswith("  ") and not line.startswith("    ") and "Section" not in line:
        name = line.strip(); continue
    m = re.match(r"^\s+(\S+)\s+(\S+)\s+([\d.,]+)\s+([\d.,]+)\s+([\d.,]+)\s*$", line)
    if m and name:
        metric, unit, mn, mx, avg = m.groups()
        cur.setdefault(name, {})[metric] = (unit, float(avg.replace(",", "")))
for n, d in cur.items():
    t = d.get("gpu__time_duration.sum")
    if not t: continue
    us = t[1] / 1000 if t[0] == "nsecond" else t[1] if t[0] == "usecond" else t[1] * 1000
    print(f"{us:8.2f} us  grid {d.get('launch__grid_size',('',0))[1]:7.0f}  block {d.get('launch__block_size',('',0))[1]:5.0f}  {n[:150]}")
PY
echo "[$(el) s] ALL DONE"
