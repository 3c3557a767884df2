#!/usr/bin/env bash
# session 12 call 1 (lead): gpu-test on HEAD (cu_scratch_grow had not run on a GPU); the embedded model in
# bf16 / q8 / q4 (`bench --depths 0,3`, for "AR ahead of llama.cpp in every format": session 9 had q8 2,729
# vs llama.cpp 2,845); ncu: per-kernel times of a small-shape 1-row and 8-row forward with the caches left
# warm, and the full sections of the q4 decode matmul and the attention core
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
timeout 300 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L; echo | tee -a $L
cp -r models/qwen35-tiny-code /tmp/emb && rm -f /tmp/emb/*.xz /tmp/emb/golden.safetensors
build/mtplx convert --q-bits 4 --out /tmp/emb-q4 --model /tmp/emb --quiet; build/mtplx convert --q-bits 8 --out /tmp/emb-q8 --model /tmp/emb --quiet
cp /tmp/emb/val_code.txt /tmp/emb-q4/; cp /tmp/emb/val_code.txt /tmp/emb-q8/
build/mtplx synth --config .gpu-lead/small-config.json --out /tmp/sb --quiet &
build/mtplx synth --config .gpu-lead/small-config.json --dtype q4 --out /tmp/sq --quiet &
wait
for r in 1 2; do for m in /tmp/emb /tmp/emb-q8 /tmp/emb-q4; do
  echo "== $(basename $m) $(timeout 60 build/mtplx bench --device cuda --model $m --depths 0,3 2>&1 | grep -E '^(AR|D3)' | awk '{printf "%s %s ", $1, $2}')"
done; done | tee -a $L
echo "bench $(el) s" | tee -a $L
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel"
timeout 90 $NCU build/mtplx bench --device cuda --model /tmp/sb --verify-cost --rows 1 --reps 3 --context 512 --logits-top 20 > $OUT/ncu-sb-r1.txt 2>&1
timeout 90 $NCU build/mtplx bench --device cuda --model /tmp/sq --verify-cost --rows 8 --reps 2 --context 512 --logits-top 20 > $OUT/ncu-sq-r8.txt 2>&1
echo "ncu summaries $(el) s" | tee -a $L
FULL="ncu --clock-control none --set full --launch-skip 6 --launch-count 1"
timeout 90 $FULL -k regex:k_sk_q build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 8 --rows 1 --reps 2 > $OUT/ncu-full-q4.txt 2>&1
timeout 90 $FULL -k regex:k_sk_bf16 build/mtplx bench --device cuda --matmul bf16 --shape 17408x5120 --count 4 --rows 1 --reps 2 > $OUT/ncu-full-bf16.txt 2>&1
timeout 90 $FULL -k regex:attn_core build/mtplx bench --device cuda --model /tmp/sb --verify-cost --rows 1 --reps 2 --context 512 > $OUT/ncu-full-attn.txt 2>&1
timeout 90 $FULL -k regex:gdn_seqs build/mtplx bench --device cuda --model /tmp/sb --verify-cost --rows 1 --reps 2 --context 512 > $OUT/ncu-full-gdn.txt 2>&1
echo "total $(el) s" | tee -a $L
