#!/usr/bin/env bash
# bench/kernels.sh — the kernel benchmarks recorded in bench/kernels.md: machine read bandwidth,
# bench-2b synth per format, verify cost (R-row / 1-row forward), AR decode GB/s as a fraction of
# the bandwidth, prefill tok/s for a 2k prompt. Usage: bash bench/kernels.sh OUTDIR [formats...]
# Env: MTPLX (binary, default build/mtplx), B2B_DIR (where checkpoints go, default /tmp),
# REPS (verify reps, default 9), PREFILL (tokens, default 2048; 0 = skip),
# THREADS (space-separated thread counts, default: the pool's default = all CPUs; e.g. "16 2"),
# KERNELS (space-separated MTPLX_KERNEL values, default: the best path; e.g. "amx avx512" compares
# the AMX-INT8 quantized kernel with VNNI only).
# Each run writes OUTDIR/bench-FORMAT[-tN][-KERNEL].json; a summary table goes to OUTDIR/summary.txt.
set -u
out=${1:?output dir}; shift
formats=${*:-q4 q8 bf16}
bin=${MTPLX:-build/mtplx}
dir=${B2B_DIR:-/tmp}
threads_l=${THREADS:-default}
kernels_l=${KERNELS:-default}
mkdir -p "$out"
{ nproc; lscpu | grep -E "Model name|^CPU\(s\)|L3|Flags" | sed 's/Flags:.*\(avx512[a-z_0-9]* \).*/&/' | cut -c1-400; } > "$out/machine.txt" 2>&1
for f in $formats; do
    ck=$dir/bench-2b-$f
    if [ ! -f "$ck/model.safetensors.index.json" ]; then
        "$bin" synth --preset bench-2b --dtype "$f" --out "$ck" --json > "$out/synth-$f.json" 2> "$out/synth-$f.err" || { echo "synth $f failed"; cat "$out/synth-$f.err"; continue; }
    fi
    for th in $threads_l; do
        for k in $kernels_l; do
            name=bench-$f
            envs=()
            [ "$th" != default ] && name=$name-t$th && envs+=("MTPLX_THREADS=$th")
            [ "$k" != default ] && name=$name-$k && envs+=("MTPLX_KERNEL=$k")
            pf=()
            [ "${PREFILL:-2048}" != 0 ] && pf=(--prefill "${PREFILL:-2048}")
            env "${envs[@]}" "$bin" bench --membw --verify-cost --rows 8 --reps "${REPS:-9}" --context 256 "${pf[@]}" \
                --model "$ck" --json > "$out/$name.json" 2> "$out/$name.err"
            echo "$name: $(cat "$out/$name.json")"
        done
    done
done
# one line per run: threads, kernel, 1-row ms, AR GB/s, membw GB/s (read between the forwards),
# fraction, verify cost 2/3/4/8, prefill tok/s
python3 - "$out" > "$out/summary.txt" <<'PY'
import json, sys, glob, os
print("%-24s %4s %-7s %8s %7s %7s %5s %5s %5s %5s %5s %8s" % ("run", "thr", "kernel", "1row_ms", "AR_GB/s", "membw", "frac", "v2", "v3", "v4", "v8", "prefill"))
for p in sorted(glob.glob(os.path.join(sys.argv[1], "bench-*.json"))):
    try: j = json.load(open(p))
    except Exception: continue
    v = j.get("verify_cost", {}); fm = j.get("forward_ms", {})
    print("%-24s %4s %-7s %8.2f %7.1f %7.1f %5.2f %5.2f %5.2f %5.2f %5.2f %8.1f" % (
        os.path.basename(p)[:-5], j.get("threads"), j.get("kernel"), fm.get("1", 0), j.get("ar_decode_gbs", 0),
        j.get("membw_interleaved_gbs", j.get("membw", {}).get("gbs_all_threads", 0)), j.get("ar_decode_fraction_of_membw", 0),
        v.get("2", 0), v.get("3", 0), v.get("4", 0), v.get("8", 0), j.get("prefill", {}).get("tok_s", 0)))
PY
cat "$out/summary.txt"
