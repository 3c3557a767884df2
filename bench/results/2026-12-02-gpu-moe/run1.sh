#!/usr/bin/env bash
# helper moe, device call 1: MoE on the device — correctness (test_backend_cuda, family goldens) and
# 35B-A3B-10l q4 decode, new path vs MTPLX_CUDA_MOE=0 (the host-routed path)
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
git apply .gpu-moe/branch1.patch || { echo "PATCH FAILED"; exit 1; }
touch $(git ls-files src tests/unit | grep -E "\.(c|h|cu|cuh)$")  # outputs of other helpers' patches may be newer
scripts/device-build.sh build model build/mtplx build/tests/test_backend_cuda build/tests/test_family_goldens CUDA=1 > $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; echo BUILD FAILED; exit 1; }
echo "build $(el) s"
S=/tmp/moe; mkdir -p $S
(nice -n 19 build/mtplx synth --preset qwen35-35b-a3b-10l --dtype q4 --out $S/q4 --quiet > $OUT/synth.log 2>&1; echo "q4 done $(el)" >> $OUT/synth.log) &
export MTPLX_DEVICE=cuda
timeout 45 build/tests/test_backend_cuda > $OUT/tbc.txt 2>&1; echo "test_backend_cuda rc $? at $(el) s"; grep -E "FAIL|passed|MoE|moe" $OUT/tbc.txt | head -20
timeout 40 build/tests/test_family_goldens > $OUT/goldens.txt 2>&1; echo "goldens rc $? at $(el) s"; grep -E "FAIL|passed" $OUT/goldens.txt | head
while ! grep -q "q4 done" $OUT/synth.log && [ $(el) -lt 120 ]; do sleep 1; done; cat $OUT/synth.log
V() { env "$@" timeout 40 build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 --model $S/q4 2>&1; }
if [ -f $S/q4/config.json ]; then
  V X=1 > $OUT/new-q4.txt; echo "new q4 at $(el) s"; grep -iE "bandwidth|weights|rows|tok/s|ms" $OUT/new-q4.txt | head -20
  [ $(el) -lt 140 ] && { V MTPLX_CUDA_MOE=0 > $OUT/old-q4.txt; echo "old q4 at $(el) s"; grep -iE "bandwidth|weights|rows|tok/s|ms" $OUT/old-q4.txt | head -20; }
  [ $(el) -lt 160 ] && { MTPLX_CUDA_PROFILE=1 timeout 15 build/mtplx bench --device cuda --verify-cost --rows 1 --reps 11 --context 16 --model $S/q4 > $OUT/prof-q4.txt 2>&1; echo "prof at $(el) s"; sed -n '/profile/,$p' $OUT/prof-q4.txt | head -40; }
fi
echo "all done $(el) s"
