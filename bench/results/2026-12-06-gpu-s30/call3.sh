#!/usr/bin/env bash
# session 30 call 3: the GDN step preparing the out-projection's input in its own kernel (one launch a GDN
# layer fewer): gpu-test (its new check 8b compares the bits), then MTPLX_CUDA_FUSE_SEQ=0 / 1 alternated on
# the embedded model (verify-cost forwards, D3 bench) and the 27B-16l q4 step.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc $? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L; echo | tee -a $L
grep -A8 "^FAIL" $OUT/gpu-test.txt | head -40
build/mtplx convert --q-bits 4 --out /tmp/e-q4 --quiet > /dev/null
for round in 1 2 3; do
  for f in 0 1; do
    for m in "" /tmp/e-q4; do
      echo "FUSE_SEQ=$f ${m:-bf16}: $(MTPLX_CUDA_FUSE_SEQ=$f build/mtplx bench --device cuda ${m:+--model $m} --verify-cost --rows 4 --reps 41 --context 64 2>&1 | grep -E '^ +[14]-row' | tr -s ' ' | tr '\n' ' ')" | tee -a $L
    done
  done
done
echo "embedded verify $(el) s" | tee -a $L
for round in 1 2; do
  for f in 0 1; do
    echo "FUSE_SEQ=$f D3: $(MTPLX_CUDA_FUSE_SEQ=$f build/mtplx bench --device cuda --prompts 4 --max-tokens 128 --depths 0,3 --temperature 0.6 2>&1 | grep -iE 'depth|tok/s' | tr -s ' ' | tr '\n' ' ' | cut -c1-400)" | tee -a $L
  done
done
echo "embedded D3 $(el) s" | tee -a $L
if [ $(el) -lt 400 ]; then
  mkdir -p /tmp/s
  build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/s/q4 --quiet 2>&1 | tail -1
  for round in 1 2; do
    for f in 0 1; do
      echo "FUSE_SEQ=$f 27B q4: $(MTPLX_CUDA_FUSE_SEQ=$f build/mtplx bench --device cuda --membw --verify-cost --rows 4 --reps 7 --context 512 --model /tmp/s/q4 2>&1 | grep -E '[14]-row|AR decode' | tr -s ' ' | tr '\n' ' ')" | tee -a $L
    done
  done
fi
echo "done $(el) s" | tee -a $L
