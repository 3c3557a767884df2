#!/usr/bin/env bash
# session 31 call 1: (a) attention prepares the output projection's input (attn-prep, applied) and the
# pipelined integer-pipe decode kernel (MTPLX_CUDA_SK_PF) checked bit-identical (gpu-test checks 8 and 8b only);
# (b) 1-row q matmul GB/s with SK_PF 0..4 alternated; (c) 27B-16l q4 1-row step, same;
# (d) embedded D3 with FUSE_SEQ 0 / 1 (bf16, q4), if time is left.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
SKIP_UNIT=1 GPU_TEST_SKIP='^(default|cli|refuses|launch|attention|batch|gemm|sk_layouts|graph|compute)' \
  scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test 8/8b rc $? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L; echo | tee -a $L
grep -E "differ|integer pipe|fused prep" $OUT/gpu-test.txt | head -30 | tee -a $L
[ -x build/mtplx ] || exit 1
mm() { # label env... : 1-row GB/s
  local lab=$1; shift
  local a b c
  a=$(env "$@" timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 16 --rows 1 --reps 7 2>&1 | grep -E 'T=1 ' | awk '{print $4}')
  b=$(env "$@" timeout 40 build/mtplx bench --device cuda --matmul q4 --shape 248320x5120 --count 1 --rows 1 --reps 7 2>&1 | grep -E 'T=1 ' | awk '{print $4}')
  c=$(env "$@" timeout 40 build/mtplx bench --device cuda --matmul q8 --shape 17408x5120 --count 8 --rows 1 --reps 7 2>&1 | grep -E 'T=1 ' | awk '{print $4}')
  echo "$lab: q4 17408x5120 $a | q4 head $b | q8 17408x5120 $c GB/s" | tee -a $L
}
for round in 1 2; do
  for pf in 0 1 2 3 4; do mm "SK_PF=$pf" MTPLX_CUDA_SK_PF=$pf; done
done
echo "matmuls $(el) s" | tee -a $L
mkdir -p /tmp/s
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s/q4 --quiet 2>&1 | tail -1
echo "synth $(el) s" | tee -a $L
for round in 1 2; do
  for pf in 0 1 2 3 4; do
    [ $(el) -gt 480 ] && break 2
    echo "SK_PF=$pf: $(MTPLX_CUDA_SK_PF=$pf timeout 60 build/mtplx bench --device cuda --membw --verify-cost --rows 2 --reps 7 --context 512 --model /tmp/s/q4 2>&1 | grep -E '1-row|AR decode' | tr '\n' ' ')" | tee -a $L
  done
done
rm -rf /tmp/s/q4
echo "q4 step $(el) s" | tee -a $L
build/mtplx convert --q-bits 4 --out /tmp/e-q4 --quiet > /dev/null
for round in 1 2; do
  for f in 0 1; do
    for m in "" /tmp/e-q4; do
      [ $(el) -gt 560 ] && break 3
      echo "FUSE_SEQ=$f ${m:-bf16} D3: $(MTPLX_CUDA_FUSE_SEQ=$f timeout 30 build/mtplx bench --device cuda ${m:+--model $m} --prompts 4 --max-tokens 128 --depths 0,3 --temperature 0.6 2>&1 | grep -E 'bench pass' | tr -s ' ' | tr '\n' ' ' | cut -c1-300)" | tee -a $L
    done
  done
done
echo "done $(el) s" | tee -a $L
