#!/usr/bin/env bash
# helper cudaq4, device call 1 (session 6): merged-main behaviour (BASE: the knobs of this branch off) against
# the branch's q4 / bf16 cp.async-ring matmul and batched-load rmsnorm, side by side in one run, on the
# 27B-16l shape; plus test_backend_cuda and a bit-identity check (logits, base vs new) at real shapes.
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
G=.gpu-cudaq4
git apply $G/branch.patch || { echo PATCH FAILED; exit 1; }
touch src/backend/cuda/*.cu
scripts/device-build.sh build build/mtplx CUDA=1 > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; echo BUILD FAILED; exit 1; }
M=build/mtplx TB=build/tests/test_backend_cuda
( scripts/device-build.sh build $TB CUDA=1 >> $OUT/build.log 2>&1; echo "test build rc $? at $(el) s" >> $OUT/build.log ) & PB=$!
echo "ready $(el) s"
S=/tmp/s6; mkdir -p $S
( nice -n 5 $M synth --preset qwen35-27b-16l --dtype q4 --out $S/q4 --quiet; echo "q4 synth done at $(el) s" ) > $OUT/synth-q4.log 2>&1 &
( nice -n 5 $M synth --preset qwen35-27b-16l --dtype bf16 --out $S/bf16 --quiet; echo "bf16 synth done at $(el) s" ) > $OUT/synth-bf16.log 2>&1 &
export MTPLX_DEVICE=cuda
BASE="MTPLX_CUDA_Q4_V2=0 MTPLX_CUDA_BF16_V2=0 MTPLX_CUDA_RMS_BATCH=1"
NEW="X=1"
# 2. the matmul alone (GB/s of weight bytes)
MM() { local cfg=$1; shift; echo "== $cfg $*"; env $cfg timeout 25 $M bench --device cuda --matmul "$@" --reps 5 2>&1 | grep -E "GB/s|rror"; }
{ timeout 20 $M bench --device cuda --membw 2>&1 | grep -i bandwidth
  MM "$BASE" q4 --shape 17408x5120 --count 32 --rows 8
  MM "$NEW" q4 --shape 17408x5120 --count 32 --rows 8
  MM "MTPLX_CUDA_SK_STAGES=8" q4 --shape 17408x5120 --count 32 --rows 8
  MM "MTPLX_CUDA_SK_STAGES=4" q4 --shape 17408x5120 --count 32 --rows 1
  MM "$BASE" q4 --shape 1024x5120 --count 128 --rows 1
  MM "$NEW" q4 --shape 1024x5120 --count 128 --rows 1
  MM "$BASE" bf16 --shape 17408x5120 --count 16 --rows 8
  MM "$NEW" bf16 --shape 17408x5120 --count 16 --rows 8
  MM "MTPLX_CUDA_SK_STAGES=8" bf16 --shape 17408x5120 --count 16 --rows 1
  MM "MTPLX_CUDA_SK_BPS=6" bf16 --shape 17408x5120 --count 16 --rows 1
} > $OUT/matmul.txt 2>&1; echo "matmul $(el) s"; cat $OUT/matmul.txt
# 1. correctness: every format vs the CPU, rows of R = 1..20 bit-identical to solo rows (ring depth 6, and 4 / 8 alongside)
[ -n "${PB:-}" ] && wait $PB; tail -1 $OUT/build.log
if [ -x $TB ]; then
  ( MTPLX_CUDA_SK_STAGES=4 timeout 60 $TB > $OUT/test-st4.txt 2>&1 ) & P4=$!
  ( MTPLX_CUDA_SK_STAGES=8 timeout 60 $TB > $OUT/test-st8.txt 2>&1 ) & P8=$!
  timeout 60 $TB > $OUT/test.txt 2>&1; wait $P4 $P8
  echo "tests $(el) s:"; grep -h "FAIL\|passed" $OUT/test.txt $OUT/test-st4.txt $OUT/test-st8.txt
else tail -20 $OUT/build.log; fi
# 3. the 27B-16l step: pure AR (--rows 1), base and new alternated; per-op profile; logits base == new
V() { local f=$1 c=$2; env $c timeout 40 $M bench --device cuda --membw --verify-cost --rows 1 --reps 7 --context 512 --model $S/$f 2>&1 | grep -E "forward|AR|GB/s"; }
PR() { local f=$1 c=$2; env $c MTPLX_CUDA_PROFILE=2 timeout 40 $M bench --device cuda --verify-cost --rows 1 --reps 21 --context 16 --model $S/$f > $OUT/prof-$f-$3.txt 2>&1; sed -n '/profile/,$p' $OUT/prof-$f-$3.txt; }
LG() { local f=$1 c=$2; env $c timeout 40 $M logits --model $S/$f --tokens 11,2222,333,44444,5,66,777,8888 --step --out /tmp/lg-$f-$3.st > /dev/null 2>&1 || echo "logits $f $3 failed"; }
for f in q4 bf16; do
  while ! grep -q "done" $OUT/synth-$f.log && [ $(el) -lt 150 ]; do sleep 1; done; cat $OUT/synth-$f.log
  [ -f $S/$f/config.json ] || continue
  { echo "== $f base"; V $f "$BASE"; echo "== $f new"; V $f "$NEW"
    if [ $(el) -lt 140 ]; then echo "== $f base again"; V $f "$BASE"; echo "== $f new again"; V $f "$NEW"; fi
  } 2>&1 | tee $OUT/ar-$f.txt; echo "ar $f $(el) s"
  if [ $(el) -lt 150 ]; then echo "== profile $f new"; PR $f "$NEW" new; fi
done
for f in q4 bf16; do
  [ -f $S/$f/config.json ] && [ $(el) -lt 158 ] || continue
  LG $f "$BASE" base; LG $f "$NEW" new
  cmp /tmp/lg-$f-base.st /tmp/lg-$f-new.st && echo "logits --step $f: base == new (bit for bit)"; echo "lg $f $(el) s"
done
for f in q4 bf16; do
  [ -f $S/$f/config.json ] && [ $(el) -lt 160 ] || continue
  echo "== profile $f base"; PR $f "$BASE" base
done
echo "all done $(el) s"
