# session 43, call 5 (warm): where a one-row attention block's ~16 us go, by source line (ncu warp-stall
# samples of one k_attn_core_seqs_fp launch, caches kept; the build has -lineinfo), outputs under $OUT.
set -uo pipefail
export MTPLX_DEVICE=cuda
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/build.txt 2>&1
R="build/mtplx bench --device cuda --prompts 1 --max-tokens 64 --repeats 1 --depths 8@0.4 --temperature 0.6"
ncu --clock-control none --cache-control none --set full --import-source yes -k regex:k_attn_core_seqs_fp --launch-skip 30 \
    --launch-count 1 -o /tmp/att -f $R > /dev/null 2>&1
ncu -i /tmp/att.ncu-rep --page source --print-source sass --csv > $OUT/src.csv 2>&1
ncu -i /tmp/att.ncu-rep --page source --print-source cuda,sass --csv > $OUT/src-cuda-sass.csv 2>&1
head -c 600 $OUT/src.csv
python3 - $OUT/src.csv <<'PY' | tee $OUT/src-top.txt
import csv, sys, io
lines = open(sys.argv[1], errors="replace").read().splitlines()
start = next((i for i, l in enumerate(lines) if l.startswith('"#"') or l.startswith('"Line"') or '"Source"' in l), None)
if start is None: print("\n".join(lines[:40])); sys.exit()
rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
hdr = rows[0]; print(hdr[:12])
col = next((i for i, h in enumerate(hdr) if h.startswith("Warp Stall Sampling (All")), None)
if col is None: print(hdr); sys.exit()
src = next(i for i, h in enumerate(hdr) if h == "Source")

ln = 0
tot = 0; out = []
for r in rows[1:]:
    if len(r) <= col: continue
    try: v = float(r[col].replace(",", ""))
    except ValueError: continue
    tot += v; out.append((v, r[0], r[src].strip()[:110]))
out.sort(reverse=True)
print("total samples", tot)
for v, l, s in out[:40]: print(f"{v:7.0f} {100*v/tot:5.1f}%  {l:>5}  {s}")
PY
