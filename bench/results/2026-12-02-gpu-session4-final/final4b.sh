#!/usr/bin/env bash
# lead, session 4, last device minutes: 27B-16l bf16 on merged main (PDL + fusions, graphs off by default, batched sequence ops)
set -uo pipefail
scripts/device-build.sh build build/mtplx CUDA=1 > /tmp/b.log 2>&1 || { tail -20 /tmp/b.log; exit 1; }
d=/tmp/s27; t0=$(date +%s); timeout 100 build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out $d --quiet; echo "synth $(( $(date +%s) - t0 )) s"
timeout 40 build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 3 --context 512 --model $d 2>&1 | tail -14 | tee $OUT/bench-27b.txt
for n in 1 8 64; do timeout 30 build/mtplx run --device cuda --model $d --prompt-tokens 11,22,33,44,55,66,77,88 --max-tokens 64 \
    --temperature 0.6 --seed 1 --depth 0 --samples $n --parallel --max-seqs 64 --quiet 2>&1 >/dev/null | grep aggregate; done | tee $OUT/sched-27b.txt
