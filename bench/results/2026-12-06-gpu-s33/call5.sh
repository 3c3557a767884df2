#!/usr/bin/env bash
# Session 33, call 5: the tiled MoE kernels (prefill: calls of more than MTPLX_CUDA_MOE_SLOTS rows) with their
# tile's rows staged in shared memory (MTPLX_CUDA_MOE_TSTAGE), several output groups a block after the staging
# (MTPLX_CUDA_MOE_TLOOP), every word's values taken in two parts with each row's inputs read once a part (not
# once per output), and the q -> float conversion by the exponent trick instead of I2F. Bits first (rows alone vs
# in tiles, tiles vs slots, every knob), then the 35B-A3B-10l q4 4k prefill (call 2: 3,919 tok/s) and decode
# (call 3: 834-838 tok/s), then the full 35B-A3B's 4k prefill (call 4: 978 tok/s) if time is left.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda build/tests/test_family_goldens \
  build/tests/test_batch > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "built $(el) s" | tee -a $L
for e in "" MTPLX_CUDA_MOE_SLOTS=4 MTPLX_CUDA_MOE_SLOTS=0 "MTPLX_CUDA_MOE_SLOTS=0 MTPLX_CUDA_MOE_TSTAGE=0" "MTPLX_CUDA_MOE_SLOTS=4 MTPLX_CUDA_MOE_TLOOP=1"; do
  env $e timeout 60 build/tests/test_backend_cuda > $OUT/tbc.txt 2>&1; echo "test_backend_cuda [$e] rc=$? $(tail -1 $OUT/tbc.txt)" | tee -a $L
done
for t in test_family_goldens test_batch; do timeout 90 build/tests/$t > $OUT/$t.txt 2>&1; echo "$t rc=$? $(tail -1 $OUT/$t.txt)" | tee -a $L; done
T=11,48,85,122,159,196,233,250,7,99,201,3
for m in tests/data/goldens/qwen3_5_moe tests/data/goldens-extra/qwen3_5_moe_b tests/data/goldens/deepseek_v3; do
  for mode in "" "--step"; do
    MTPLX_CUDA_MOE_SLOTS=0 MTPLX_CUDA_MOE_GATE1=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/l0.st > /dev/null 2>&1
    r="$m [$mode]:"; k=1
    for e in "" MTPLX_CUDA_MOE_STAGE=0 MTPLX_CUDA_MOE_TSTAGE=0 "MTPLX_CUDA_MOE_SLOTS=0 MTPLX_CUDA_MOE_TSTAGE=0" "MTPLX_CUDA_MOE_SLOTS=0 MTPLX_CUDA_MOE_TLOOP=1"; do
      env $e build/mtplx logits --model $m --tokens $T $mode --out /tmp/l$k.st > /dev/null 2>&1
      cmp -s /tmp/l0.st /tmp/l$k.st && r="$r [$e]=same" || r="$r [$e]=DIFFER"; k=$((k+1))
    done
    echo "$r" | tee -a $L
  done
done
echo "bits done $(el) s" | tee -a $L
M=/tmp/moe/q4; mkdir -p /tmp/moe
build/mtplx synth --preset qwen35-35b-a3b-10l --dtype q4 --out $M --quiet 2>&1 | tail -1 | tee -a $L
pf() { timeout 60 env "$@" build/mtplx bench --device cuda --prefill 4096 --model $M 2>&1 | tail -1; }
for r in 1 2; do
  for e in MTPLX_CUDA_MOE_TSTAGE=1 MTPLX_CUDA_MOE_TSTAGE=0 MTPLX_CUDA_MOE_TLOOP=1 MTPLX_CUDA_MOE_TLOOP=8; do
    [ $(el) -lt 330 ] && echo "10l prefill [$e]: $(pf $e)" | tee -a $L
  done
done
[ $(el) -lt 340 ] && echo "10l decode: $(timeout 60 build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 --model $M 2>&1 | grep -E 'row forward|tok/s' | tr -s ' ' | tr '\n' ' ')" | tee -a $L
if [ $(el) -lt 250 ]; then
  rm -rf $M; M=/tmp/q35
  build/mtplx synth --preset qwen35-35b-a3b --dtype q4 --out $M --quiet 2>&1 | tail -1 | tee -a $L
  [ $(el) -lt 370 ] && echo "35B prefill 4096: $(pf MTPLX_CUDA_MOE_TSTAGE=1)" | tee -a $L
fi
echo "done $(el) s" | tee -a $L
