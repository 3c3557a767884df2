#!/usr/bin/env bash
# (the knobs MTPLX_CUDA_SK_RING / MTPLX_CUDA_SK_DB these calls compared existed only in the tree of that call:
# the kernels behind them were slower or level and were not committed; bench/cuda.md "Session 13")
# session 13 call 1 (lead): gpu-test with the cp.async weight rings (k_sk_qr / k_sk_bf16r, default 8 KB a
# warp); then the same binary with MTPLX_CUDA_SK_RING=8 / 4 / 0 (0: the batched-register kernels of
# before), alternated: the matmul alone (27B shapes), 27B-16l q4 / bf16 AR + verify, the embedded model
# (bf16 / q8 / q4, for "AR ahead of llama.cpp in every format"), the small-model shapes
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
timeout 300 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L; echo | tee -a $L
[ -x build/mtplx ] || exit 1
(timeout 150 build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth27.txt 2>&1;
 timeout 150 build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/b27 --quiet >> /tmp/synth27.txt 2>&1) &
for r in 8 0 4; do
  for f in q4:16 bf16:4 q8:8; do
    MTPLX_CUDA_SK_RING=$r timeout 40 build/mtplx bench --device cuda --matmul ${f%%:*} --shape 17408x5120 --count ${f##*:} --rows 8 --reps 5 > $OUT/matmul-${f%%:*}-ring$r.txt 2>&1
    echo "== ring $r matmul ${f%%:*}: $(grep -iE 'GB/s' $OUT/matmul-${f%%:*}-ring$r.txt | tr -s ' ' | tr '\n' '|' | cut -c1-400)"
  done
done | tee -a $L
echo "matmul $(el) s" | tee -a $L
cp -r models/qwen35-tiny-code /tmp/emb && rm -f /tmp/emb/*.xz /tmp/emb/golden.safetensors
build/mtplx convert --q-bits 4 --out /tmp/emb-q4 --model /tmp/emb --quiet; build/mtplx convert --q-bits 8 --out /tmp/emb-q8 --model /tmp/emb --quiet
cp /tmp/emb/val_code.txt /tmp/emb-q4/; cp /tmp/emb/val_code.txt /tmp/emb-q8/
for k in 1 2; do for r in 8 0; do for m in /tmp/emb /tmp/emb-q8 /tmp/emb-q4; do
  echo "== ring $r $(basename $m): $(MTPLX_CUDA_SK_RING=$r timeout 60 build/mtplx bench --device cuda --model $m --depths 0,3 2>&1 | grep -E '^(AR|D3)' | awk '{printf "%s %s ", $1, $2}')"
done; done; done | tee -a $L
echo "embedded $(el) s" | tee -a $L
wait; tail -2 /tmp/synth27.txt | tee -a $L
for m in /tmp/q27 /tmp/b27; do [ -f $m/config.json ] || continue; for r in 8 0 4; do
  echo "== ring $r $m: $(MTPLX_CUDA_SK_RING=$r timeout 100 build/mtplx bench --device cuda --model $m --membw --verify-cost --rows 4 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E 'row forward|AR decode|GB/s' | tr -s ' ' | tr '\n' '|' | cut -c1-500)"
done; done | tee -a $L
echo "27B $(el) s" | tee -a $L
FULL="ncu --clock-control none --set full --launch-skip 6 --launch-count 1"
timeout 60 $FULL -k regex:k_sk_qr build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 8 --rows 1 --reps 2 > $OUT/ncu-full-q4-ring.txt 2>&1
xz -9 $OUT/ncu-full-q4-ring.txt
echo "total $(el) s" | tee -a $L
