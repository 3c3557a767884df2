#!/usr/bin/env bash
# session 10 call 3 (lead): gpu-test after the GDN step's launch bounds; the 27B's sampler with logits lists
# on / off (T 0.6 top-k 20, AR and D3; greedy AR); 27B verify steps with whole rows / top-20 lists
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
timeout 300 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(( $(date +%s)-t0 )) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L; echo | tee -a $L
W=/tmp/b27; timeout 100 build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out $W --quiet; echo "synth27 $(( $(date +%s)-t0 )) s" | tee -a $L
R="build/mtplx run --device cuda --model $W --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 200"
for d in 0 3; do for Ls in 0 1 0 1; do echo "== 27B lists=$Ls D$d T0.6: $(MTPLX_SAMPLER_LISTS=$Ls timeout 60 $R --depth $d --temperature 0.6 --top-k 20 --top-p 0.95 2>&1 | tail -1)"; done; done | tee -a $L
for Ls in 0 1; do echo "== 27B lists=$Ls D0 greedy: $(MTPLX_SAMPLER_LISTS=$Ls timeout 60 $R --depth 0 --temperature 0 2>&1 | tail -1)"; done | tee -a $L
for k in 0 20; do a=; [ $k = 20 ] && a="--logits-top 20"
  MTPLX_CUDA_STEPS=1 timeout 100 build/mtplx bench --device cuda --model $W --verify-cost --rows 4 --reps 5 --context 512 $a > $OUT/steps27-top$k.txt 2>&1; done
grep -A6 "rows  steps" $OUT/steps27-top*.txt | tee -a $L
for Ls in 0 1 0 1; do echo "== emb lists=$Ls $(MTPLX_SAMPLER_LISTS=$Ls build/mtplx bench --device cuda --depths 0,3 2>&1 | grep -E '^(AR|D3)' | awk '{printf "%s %s ", $1, $2}')"; done | tee -a $L
echo "total $(( $(date +%s)-t0 )) s" | tee -a $L
