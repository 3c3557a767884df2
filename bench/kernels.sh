#!/usr/bin/env bash
# bench/kernels.sh — the kernel benchmarks recorded in bench/kernels.md: machine read bandwidth,
# bench-2b synth per format, verify cost (R-row / 1-row forward), AR decode GB/s as a fraction of
# the bandwidth, prefill tok/s for a 2k prompt. Usage: bash bench/kernels.sh OUTDIR [formats...]
# Env: MTPLX (binary, default build/mtplx), B2B_DIR (where checkpoints go, default /tmp),
# REPS (verify reps, default 9), PREFILL (tokens, default 2048).
set -u
out=${1:?output dir}; shift
formats=${*:-q4 q8 bf16}
bin=${MTPLX:-build/mtplx}
dir=${B2B_DIR:-/tmp}
mkdir -p "$out"
{ nproc; lscpu | grep -E "Model name|^CPU\(s\)|L3|Flags" | sed 's/Flags:.*\(avx512[a-z_0-9]* \).*/&/' | cut -c1-400; } > "$out/machine.txt" 2>&1
for f in $formats; do
    ck=$dir/bench-2b-$f
    if [ ! -f "$ck/model.safetensors.index.json" ]; then
        "$bin" synth --preset bench-2b --dtype "$f" --out "$ck" --json > "$out/synth-$f.json" 2> "$out/synth-$f.err" || { echo "synth $f failed"; cat "$out/synth-$f.err"; continue; }
    fi
    "$bin" bench --membw --verify-cost --rows 8 --reps "${REPS:-9}" --context 256 --prefill "${PREFILL:-2048}" \
        --model "$ck" --json > "$out/bench-$f.json" 2> "$out/bench-$f.err"
    echo "$f: $(cat "$out/bench-$f.json")"
done
