#!/usr/bin/env bash
# bench/zen_threads.sh — issue 17 "threads beyond 2": bench-2b q4 decode and prefill with 1, 2, 4,
# 8, 16 pool threads on the GPU machine's 16-core Intel Xeon host (run through the `device` tool
# with carry build/device-debs after `scripts/device-build.sh fetch`). Writes OUT/tN.json, the
# machine description and a summary line per thread count to OUT/summary.txt.
# Usage: OUT=dir bash bench/zen_threads.sh [thread counts...]
set -u
out=${OUT:?output dir}
mkdir -p "$out"
start=$(date +%s)
{ nproc; lscpu | grep -E "Model name|^CPU\(s\)|Thread|Socket|L3|NUMA node\(s\)"; } > "$out/machine.txt" 2>&1
scripts/device-build.sh build build/mtplx > "$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
echo "built at +$(( $(date +%s) - start )) s"
ck=/tmp/b2b-q4
[ -f $ck/config.json ] || build/mtplx synth --preset bench-2b --dtype q4 --out $ck --quiet
echo "synth at +$(( $(date +%s) - start )) s"
export MTPLX_PACK_CACHE=/tmp/qpack-cache
for t in ${*:-16 8 4 2 1}; do
    MTPLX_THREADS=$t build/mtplx bench --membw --membw-mb 1024 --verify-cost --rows 1 --reps 5 --context 64 \
        --prefill 512 --model $ck --json > "$out/t$t.json" 2> "$out/t$t.err"
    echo "t=$t at +$(( $(date +%s) - start )) s: $(head -c 600 "$out/t$t.json")"
done
python3 - "$out" > "$out/summary.txt" <<'PY'
import json, sys, glob, os
print("%4s %8s %8s %8s %6s %9s" % ("thr", "1row_ms", "AR_GB/s", "membw", "frac", "prefill"))
for p in sorted(glob.glob(os.path.join(sys.argv[1], "t*.json")), key=lambda p: int(os.path.basename(p)[1:-5])):
    try: j = json.load(open(p))
    except Exception: continue
    print("%4s %8.2f %8.1f %8.1f %6.2f %9.1f" % (j.get("threads"), j.get("forward_ms", {}).get("1", 0),
        j.get("ar_decode_gbs", 0), j.get("membw_interleaved_gbs", j.get("membw", {}).get("gbs_all_threads", 0)),
        j.get("ar_decode_fraction_of_membw", 0), j.get("prefill", {}).get("tok_s", 0)))
PY
cat "$out/summary.txt"
