#!/usr/bin/env bash
# helper cudabw, device call 2: gpu-test on the branch, then the branch's 27B-16l / matmul / embedded numbers
# (base = device call 1 of this session, same commands; knob A/B here for the grouped launch and prefetch)
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
git apply .gpu-cudabw/branch2.patch || { echo "PATCH FAILED"; exit 1; }
touch src/backend/cuda/*.cu src/backend/cuda/*.cuh tests/unit/test_backend_cuda.c
TESTS="test_backend_cuda test_forward test_rows test_generate test_generate_dist test_family_goldens test_family_layouts
       test_family_mtp test_mlx_goldens test_quant_goldens test_shapes test_synth test_fwd_pool test_batch test_sched"
targets="model build/mtplx"; for t in $TESTS; do targets="$targets build/tests/$t"; done
scripts/device-build.sh build $targets CUDA=1 > $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; echo BUILD FAILED; exit 1; }
echo "build $(el) s"
S=/tmp/cbw; mkdir -p $S
nice -n 19 bash -c "build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out $S/bf16 --quiet; echo bf16 done;
  build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out $S/q4 --quiet; echo q4 done" > $OUT/synth.log 2>&1 &
timeout 165 scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc $? at $(el) s"
grep -v "^PASS" $OUT/gpu-test.txt | tail -30; echo "PASS lines: $(grep -c '^PASS' $OUT/gpu-test.txt)"
export MTPLX_DEVICE=cuda
while ! grep -q "q4 done" $OUT/synth.log && [ $(el) -lt 200 ]; do sleep 1; done; cat $OUT/synth.log
B() { [ $(el) -lt 226 ] || { echo "skip $*"; return; }; local f=$1 n=$2 r=$3; shift 3; echo "+ $f rows $n reps $r $*"
  env "$@" timeout 12 build/mtplx bench --device cuda --membw --verify-cost --rows $n --reps $r --context 512 --model $S/$f 2>&1 | grep -E "forward|AR decode"; }
B bf16 8 5 X=1
B q4 8 5 X=1
[ $(el) -lt 215 ] && { echo "+ embedded MTP"; timeout 12 build/mtplx bench --device cuda --depths 0,3 2>&1 | tail -4; }
B bf16 1 7 X=1
B q4 1 7 X=1
B bf16 1 7 MTPLX_CUDA_SK_GROUP=0 MTPLX_CUDA_SK_PF=0
B q4 1 7 MTPLX_CUDA_SK_GROUP=0 MTPLX_CUDA_SK_PF=0
B q4 1 7 MTPLX_CUDA_SK_PF=0
B bf16 2 7 X=1
B q4 2 7 X=1
[ $(el) -lt 225 ] && { MTPLX_CUDA_PROFILE=2 timeout 8 build/mtplx bench --device cuda --verify-cost --rows 1 --reps 21 --context 16 --model $S/bf16 > $OUT/prof-bf16.txt 2>&1; sed -n '/profile/,$p' $OUT/prof-bf16.txt | grep -v embed; grep -E "1-row" $OUT/prof-bf16.txt; }
[ $(el) -lt 229 ] && { MTPLX_CUDA_PROFILE=2 timeout 6 build/mtplx bench --device cuda --verify-cost --rows 1 --reps 21 --context 16 --model $S/q4 > $OUT/prof-q4.txt 2>&1; sed -n '/profile/,$p' $OUT/prof-q4.txt | grep -v embed; grep -E "1-row" $OUT/prof-q4.txt; }
[ $(el) -lt 232 ] && timeout 6 build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 32 --rows 8 --reps 5 2>&1 | tail -9
echo "all done $(el) s"
