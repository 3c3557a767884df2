#!/usr/bin/env bash
# helper cudabw, device call 1: where a 27B-16l decode step's GPU time goes (per shape), the matmul kernel
# alone, and a first A/B of grouped stream-K launches (MTPLX_CUDA_SK_GROUP) + pre-wait L2 prefetch (MTPLX_CUDA_SK_PF)
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
git apply .gpu-cudabw/branch1.patch || { echo "PATCH FAILED"; exit 1; }
touch src/backend/cuda/*.cu src/backend/cuda/*.cuh
scripts/device-build.sh build model build/mtplx build/tests/test_backend_cuda CUDA=1 > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; echo BUILD FAILED; exit 1; }
echo "build $(el) s"; which ncu nsys 2>&1 | head -3
S=/tmp/cbw; mkdir -p $S
nice -n 19 bash -c "build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out $S/bf16 --quiet; echo bf16 done;
  build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out $S/q4 --quiet; echo q4 done" > $OUT/synth.log 2>&1 &
export MTPLX_DEVICE=cuda
BASE="MTPLX_CUDA_SK_GROUP=0 MTPLX_CUDA_SK_PF=0"
{ timeout 30 build/tests/test_backend_cuda 2>&1 | tail -3
  for cfg in "$BASE" "X=1" "MTPLX_CUDA_SK_GROUP=0" "MTPLX_CUDA_SK_PF=0"; do env $cfg timeout 20 build/mtplx logits --tokens 11,2222,333,44444,5,66,777 --step --mtp --out /tmp/cbw-l.st >/dev/null 2>&1; md5sum /tmp/cbw-l.st | sed "s/ .*/  $cfg/"; done
} 2>&1 | tee $OUT/correct.txt
M() { timeout 25 build/mtplx bench --device cuda --matmul "$@" --reps 5 2>&1 | tail -9; }
{ timeout 20 build/mtplx bench --device cuda --membw 2>&1 | grep -i bandwidth
  M bf16 --shape 17408x5120 --count 16 --rows 8
  MTPLX_CUDA_SK_BPS=2 M bf16 --shape 17408x5120 --count 16 --rows 1
  M bf16 --shape 1024x5120 --count 64 --rows 1
  M q4 --shape 17408x5120 --count 32 --rows 8
  M q4 --shape 1024x5120 --count 128 --rows 1
} > $OUT/matmul.txt 2>&1; echo "matmul benches $(el) s"; cat $OUT/matmul.txt
if which ncu >/dev/null 2>&1; then
  timeout 30 ncu --clock-control none -k regex:k_sk --launch-skip 8 --launch-count 1 --section SpeedOfLight --section Occupancy \
    --section MemoryWorkloadAnalysis --section WarpStateStats build/mtplx bench --device cuda --matmul bf16 --shape 17408x5120 --count 4 --rows 1 --reps 1 > $OUT/ncu-bf16.txt 2>&1
  echo "ncu $(el) s"; grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Block Limit|ERR" $OUT/ncu-bf16.txt | head -20
fi
while ! grep -q "bf16 done" $OUT/synth.log && [ $(el) -lt 140 ]; do sleep 2; done; echo "bf16 synth at $(el) s"; cat $OUT/synth.log
V() { local f=$1 n=$2; shift 2; env "$@" timeout 50 build/mtplx bench --device cuda --membw --verify-cost --rows $n --reps 7 --context 512 --model $S/$f 2>&1; }
if [ -f $S/bf16/config.json ]; then
  env $BASE MTPLX_CUDA_PROFILE=2 timeout 50 build/mtplx bench --device cuda --verify-cost --rows 1 --reps 21 --context 16 --model $S/bf16 > $OUT/prof-bf16.txt 2>&1
  echo "prof bf16 $(el) s"; sed -n '/profile/,$p' $OUT/prof-bf16.txt
  V bf16 8 X=1 > $OUT/new-bf16.txt; echo "new bf16 $(el) s"; grep -E "forward|AR" $OUT/new-bf16.txt
  V bf16 2 $BASE > $OUT/base-bf16.txt; echo "base bf16 $(el) s"; grep -E "forward|AR" $OUT/base-bf16.txt
fi
while ! grep -q "q4 done" $OUT/synth.log && [ $(el) -lt 190 ]; do sleep 2; done; echo "q4 synth at $(el) s"
if [ -f $S/q4/config.json ]; then
  V q4 2 X=1 > $OUT/new-q4.txt; echo "new q4 $(el) s"; grep -E "forward|AR" $OUT/new-q4.txt
  [ $(el) -lt 205 ] && { env $BASE MTPLX_CUDA_PROFILE=2 timeout 30 build/mtplx bench --device cuda --verify-cost --rows 1 --reps 21 --context 16 --model $S/q4 > $OUT/prof-q4.txt 2>&1; echo "prof q4 $(el) s"; sed -n '/profile/,$p' $OUT/prof-q4.txt; }
  [ $(el) -lt 215 ] && { V q4 2 $BASE > $OUT/base-q4.txt; echo "base q4 $(el) s"; grep -E "forward|AR" $OUT/base-q4.txt; }
fi
echo "all done $(el) s"
