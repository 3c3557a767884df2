#!/usr/bin/env bash
# session 11 call 1 (lead): the multi-block top-k kernel (test_backend_cuda, 27B verify steps with lists,
# 27B run T0.6 AR / D3), the stream-K split of small weights (MTPLX_CUDA_SK_MINU sweep on the small
# model's shape and the embedded model), the top-k path for 8,192-id rows (MTPLX_CUDA_TOP_MIN_VOCAB=1)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
scripts/device-build.sh build model build/mtplx build/tests/test_backend_cuda CUDA=1 > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "build $(( $(date +%s)-t0 )) s" | tee -a $L
MTPLX_DEVICE=cuda timeout 60 build/tests/test_backend_cuda > $OUT/tbc.txt 2>&1; echo "test_backend_cuda rc=$?" | tee -a $L
grep -iE "fail|top|passed" $OUT/tbc.txt | tail -12 | tee -a $L
B=/tmp/b27; timeout 100 build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out $B --quiet; echo "synth27 $(( $(date +%s)-t0 )) s" | tee -a $L
for k in 0 20; do a=; [ $k = 20 ] && a="--logits-top 20"
  MTPLX_CUDA_STEPS=1 timeout 100 build/mtplx bench --device cuda --model $B --verify-cost --rows 8 --reps 5 --context 512 $a > $OUT/steps27-top$k.txt 2>&1; done
grep -A10 "rows  steps" $OUT/steps27-top*.txt | tee -a $L
R="build/mtplx run --device cuda --model $B --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 200"
for d in 0 3; do for T in 1 0 1; do echo "== 27B TOP=$T D$d T0.6: $(MTPLX_CUDA_TOP=$T timeout 60 $R --depth $d --temperature 0.6 --top-k 20 --top-p 0.95 2>&1 | tail -1 | cut -c1-120)"; done; done | tee -a $L
echo "== 27B D0 greedy: $(timeout 60 $R --depth 0 --temperature 0 2>&1 | tail -1 | cut -c1-120)" | tee -a $L
echo "27B done $(( $(date +%s)-t0 )) s" | tee -a $L
S=/tmp/small; build/mtplx synth --config .gpu-lead/small-config.json --out $S --quiet
E=models/qwen35-tiny-code
for m in $S $E; do for mu in 0 32 4 64 0; do
  echo "== $(basename $m) MINU=$mu: $(MTPLX_CUDA_SK_MINU=$mu timeout 60 build/mtplx bench --device cuda --model $m --verify-cost --rows 8 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '^ +(1|4|8)-row' | awk '{printf "%s %s  ", $1, $3}')"
done; done | tee -a $L
for v in 0 1 0 1; do for mu in 0 32; do echo "== emb TOPMIN=$v MINU=$mu $(MTPLX_CUDA_TOP_MIN_VOCAB=$( [ $v = 1 ] && echo 1 || echo 65536) MTPLX_CUDA_SK_MINU=$mu timeout 60 build/mtplx bench --device cuda --depths 0,3 2>&1 | grep -E '^(AR|D3)' | awk '{printf "%s %s ", $1, $2}')"; done; done | tee -a $L
echo "total $(( $(date +%s)-t0 )) s" | tee -a $L
