#!/usr/bin/env bash
# Session 39, call 5: scripts/gpu-test.sh on the final CUDA tree (71d5f37: 16-query prefill attention blocks by
# default, the float4 commit, run/chat's adaptive default depth), then, while time lasts, the 27B-16l q4 D3
# cycle through `run` (random weights: D3 accepts nothing, so its tok/s is cycles a second) — session 16 measured
# 1.75 AR steps with the full draft head — and the embedded model's `run` default (adaptive 6@0.4) beside D3.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
bash scripts/gpu-test.sh 2>&1 | tee $OUT/gpu-test.txt | grep -E "^(PASS|FAIL|SKIP)|gpu-test:" | grep -v "^PASS" ; tail -1 $OUT/gpu-test.txt
[ $(el) -lt ${BUDGET:-330} ] || { echo "out of time after gpu-test"; exit 0; }
export MTPLX_DEVICE=cuda
[ -d /tmp/s16q4 ] || build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s16q4 --quiet
P=$(seq -s, 11 7 460)
for round in 1 2; do
    for d in 0 3; do
        echo "27B-16l q4 depth $d: $(build/mtplx run --model /tmp/s16q4 --prompt-tokens $P --max-tokens 300 --temperature 0.6 --top-k 20 \
            --top-p 0.95 --depth $d --draft-min-conf 0 --seed 5 2>&1 >/dev/null | grep -o '[0-9.]* tok/s decode')"
    done
done
for round in 1 2; do
    for d in "--depth 3" ""; do
        echo "embedded [${d:-default}]: $(build/mtplx run --prompt-tokens $P --max-tokens 400 --temperature 0.6 $d --seed 5 2>&1 >/dev/null | grep -o '[0-9.]* tok/s decode | depth [0-9]*[^,]*')"
    done
done
echo "[$(el) s] ALL DONE"
