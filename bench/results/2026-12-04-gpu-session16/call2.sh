#!/usr/bin/env bash
# session 16 call 2: L2 bulk prefetch ahead of the stream-K warps' batches (MTPLX_CUDA_SK_PF / _SK_BPF):
# matmul alone q4 g64 (1 row: integer pipe, 2 rows: mma) and bf16, then 27B-16l q4 / bf16 AR; ncu of k_sk_qdp
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1; build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/b27 --quiet > /tmp/synth2.txt 2>&1) &
for pf in 0 4 8 16 32 0 8; do
  echo "== q4 g64 PF=$pf: $(MTPLX_CUDA_SK_PF=$pf timeout 40 build/mtplx bench --device cuda --matmul q4 --group-size 64 --shape 17408x5120 --count 16 --rows 2 --reps 5 2>&1 | grep -E 'T=(1|2) ' | awk '{printf "T%s %s | ", substr($1,3), $4}')" | tee -a $L
done
for pf in 0 8 16 32 64 0; do
  echo "== bf16 BPF=$pf: $(MTPLX_CUDA_SK_BPF=$pf timeout 40 build/mtplx bench --device cuda --matmul bf16 --shape 17408x5120 --count 4 --rows 2 --reps 5 2>&1 | grep -E 'T=(1|2) ' | awk '{printf "T%s %s | ", substr($1,3), $4}')" | tee -a $L
done
echo "== q4 head PF=0/16: $(for pf in 0 16; do MTPLX_CUDA_SK_PF=$pf timeout 40 build/mtplx bench --device cuda --matmul q4 --group-size 64 --shape 248320x5120 --count 1 --rows 1 --reps 5 2>&1 | grep -E 'T=1 ' | awk '{printf "%s | ", $4}'; done)" | tee -a $L
wait; tail -1 /tmp/synth.txt /tmp/synth2.txt | tee -a $L
for pf in 0 8 16 0 8 16; do
  echo "== q27 PF=$pf: $(MTPLX_CUDA_SK_PF=$pf timeout 60 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 2 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-200)" | tee -a $L
done
for pf in 0 16 32 0 16 32; do
  echo "== b27 BPF=$pf: $(MTPLX_CUDA_SK_BPF=$pf timeout 60 build/mtplx bench --device cuda --model /tmp/b27 --verify-cost --rows 2 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-200)" | tee -a $L
done
echo "bench $(el) s" | tee -a $L
FULL="ncu --clock-control none --set full --launch-skip 6 --launch-count 1"
timeout 90 $FULL -k regex:k_sk_qdp build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 8 --rows 1 --reps 2 > $OUT/ncu-qdp.txt 2>&1
MTPLX_CUDA_SK_PF=16 timeout 90 $FULL -k regex:k_sk_qdp build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 8 --rows 1 --reps 2 > $OUT/ncu-qdp-pf16.txt 2>&1
echo "done $(el) s" | tee -a $L
