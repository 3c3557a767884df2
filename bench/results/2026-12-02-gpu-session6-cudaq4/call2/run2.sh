#!/usr/bin/env bash
# helper cudaq4, device call 2 (session 6): the rings are gone (call 1: slower); sweep of the stream-K
# split's minimum units per warp (MTPLX_CUDA_SK_MINU; default 2·U) and blocks per SM on the 27B-16l
# step, the batched rmsnorm loads alone (MTPLX_CUDA_RMS_BATCH=1 = main's), test_backend_cuda with the
# candidate splits, and bit identity of the batched rmsnorm at real shapes.
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
( nice -n 5 $M synth --preset qwen35-27b-16l --dtype q4 --out $S/q4 --quiet; echo "q4 synth done at $(el) s" ) > /tmp/synth-q4.log 2>&1 &
( nice -n 5 $M synth --preset qwen35-27b-16l --dtype bf16 --out $S/bf16 --quiet; echo "bf16 synth done at $(el) s" ) > /tmp/synth-bf16.log 2>&1 &
export MTPLX_DEVICE=cuda
MM() { local cfg=$1; shift; echo "== $cfg $*"; env $cfg timeout 25 $M bench --device cuda --matmul "$@" --reps 5 2>&1 | grep -E "GB/s|rror"; }
{ timeout 20 $M bench --device cuda --membw 2>&1 | grep -i bandwidth
  MM "MTPLX_CUDA_SK_MINU=32" q4 --shape 17408x5120 --count 32 --rows 8
  MM "X=1" q4 --shape 10240x5120 --count 48 --rows 1
  MM "MTPLX_CUDA_SK_MINU=32" q4 --shape 10240x5120 --count 48 --rows 1
  MM "MTPLX_CUDA_SK_MINU=128" bf16 --shape 17408x5120 --count 16 --rows 1
} > $OUT/matmul.txt 2>&1; echo "matmul $(el) s"; cat $OUT/matmul.txt
wait $PB; tail -1 $OUT/build.log
{ ( MTPLX_CUDA_SK_MINU=32 timeout 60 $TB > /tmp/t32.txt 2>&1 ) & P1=$!
  ( MTPLX_CUDA_SK_MINU=128 timeout 60 $TB > /tmp/t128.txt 2>&1 ) & P2=$!
  timeout 60 $TB > /tmp/t0.txt 2>&1; wait $P1 $P2
  for f in t0 t32 t128; do echo "$f: $(grep -h "FAIL\|passed" /tmp/$f.txt)"; done; } > $OUT/tests.txt 2>&1
echo "tests $(el) s"; cat $OUT/tests.txt
V() { local f=$1 c=$2; echo "== $f $c: $(env $c timeout 40 $M bench --device cuda --membw --verify-cost --rows 1 --reps 7 --context 512 --model $S/$f 2>&1 | grep -E "^AR")"; }
PR() { local f=$1 c=$2; env $c MTPLX_CUDA_PROFILE=2 timeout 40 $M bench --device cuda --verify-cost --rows 1 --reps 21 --context 16 --model $S/$f > $OUT/prof-$f-$3.txt 2>&1; sed -n '/profile/,$p' $OUT/prof-$f-$3.txt | grep -v embed_rows; }
declare -A CF=([q4]="X=1 MTPLX_CUDA_RMS_BATCH=1 MTPLX_CUDA_SK_MINU=16 MTPLX_CUDA_SK_MINU=32 MTPLX_CUDA_SK_MINU=64 MTPLX_CUDA_SK_BPS=2"
               [bf16]="X=1 MTPLX_CUDA_RMS_BATCH=1 MTPLX_CUDA_SK_MINU=64 MTPLX_CUDA_SK_MINU=128 MTPLX_CUDA_SK_MINU=256")
for f in q4 bf16; do
  while ! grep -q "done" /tmp/synth-$f.log && [ $(el) -lt 125 ]; do sleep 1; done; cat /tmp/synth-$f.log
  [ -f $S/$f/config.json ] || continue
  { for c in ${CF[$f]}; do [ $(el) -lt 128 ] && V $f $c; done
    [ $f = q4 ] && [ $(el) -lt 100 ] && for c in X=1 MTPLX_CUDA_SK_MINU=32; do V $f $c; done
  } 2>&1 | tee $OUT/ar-$f.txt; echo "ar $f $(el) s"
done
[ -f $S/q4/config.json ] && [ $(el) -lt 128 ] && { echo "== profile q4 MINU=32"; PR q4 MTPLX_CUDA_SK_MINU=32 m32; }
[ -f $S/bf16/config.json ] && [ $(el) -lt 134 ] && { echo "== profile bf16 MINU=128"; PR bf16 MTPLX_CUDA_SK_MINU=128 m128; }
[ -f $S/q4/config.json ] && [ $(el) -lt 140 ] && { echo "== profile q4 default"; PR q4 X=1 d; }
echo "all done $(el) s"
