#!/usr/bin/env bash
# helper cudacommit, session 5: branch cudacommit applied on the lead's tree; build; before/after of the
# embedded model through the scheduler (64 samples, depth 3; "before" = MTPLX_CUDA_COMMIT=0 MTPLX_CUDA_TOP=0,
# the per-sequence commit launches and whole-row logits downloads); per-op profile both ways; then the
# checks of scripts/gpu-test.sh (unit tests in two parallel groups to fit the 240 s call, then the rest).
set -uo pipefail
git apply .gpu-cudacommit/branch.patch || { echo "patch does not apply"; exit 1; }
touch src/backend/cuda/* src/engine/*.c src/model/*.c src/model/families/*.c src/kernels/*.c src/backend/*.c src/backend/cpu/*.c
TESTS="test_backend_cuda test_forward test_rows test_generate test_generate_dist test_family_goldens test_family_layouts
       test_family_mtp test_mlx_goldens test_quant_goldens test_shapes test_synth test_fwd_pool test_batch test_sched"
tg="model build/mtplx"; for t in $TESTS; do tg="$tg build/tests/$t"; done
t0=$(date +%s)
scripts/device-build.sh build $tg CUDA=1 > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; echo "FAIL build"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
export MTPLX_DEVICE=cuda
P="--prompt-tokens 11,22,33,44,55,66,77,88 --max-tokens 64 --temperature 0.6 --seed 1"
run64() { timeout 20 build/mtplx run --device cuda $P "$@" --depth 3 --samples 64 --parallel --max-seqs 64 --quiet 2>&1 >/tmp/o.txt | grep aggregate; md5sum < /tmp/o.txt; }
for r in 1 2 3; do
  echo "+ before (COMMIT=0 TOP=0), top_k 0"; MTPLX_CUDA_COMMIT=0 MTPLX_CUDA_TOP=0 run64
  echo "+ after, top_k 0"; run64
  echo "+ before (COMMIT=0 TOP=0), top_k 20"; MTPLX_CUDA_COMMIT=0 MTPLX_CUDA_TOP=0 run64 --top-k 20
  echo "+ after, top_k 20"; run64 --top-k 20
done 2>&1 | tee $OUT/sched-emb.txt
echo "+ after with PDL=1 FUSE=1 (their defaults are off since a9e9b8e)"; MTPLX_CUDA_PDL=1 MTPLX_CUDA_FUSE=1 run64 | tee -a $OUT/sched-emb.txt
for k in 0 1; do echo "+ profile COMMIT=$k TOP=$k"; MTPLX_CUDA_PROFILE=1 MTPLX_CUDA_COMMIT=$k MTPLX_CUDA_TOP=$k timeout 30 build/mtplx run --device cuda $P --depth 3 --samples 64 --parallel --max-seqs 64 --quiet 2>&1 >/dev/null | tail -30; done > $OUT/profile-emb.txt 2>&1
for k in 0 20; do for d in 0 3; do echo "+ MTPLX_TIMING top_k $k depth $d"; MTPLX_TIMING=1 timeout 20 build/mtplx run --device cuda $P --max-tokens 256 --top-k $k --depth $d --quiet 2>&1 >/dev/null | tail -2; done; done > $OUT/timing-emb.txt 2>&1
echo "bench done at $(( $(date +%s) - t0 )) s"
# the unit tests of gpu-test.sh, two groups in parallel (the two long ones alone)
( for t in test_generate_dist; do s=$(date +%s); timeout 150 build/tests/$t > /tmp/u-$t.log 2>&1 && echo "PASS $t ($(( $(date +%s) - s )) s)" || { echo "FAIL $t"; tail -15 /tmp/u-$t.log; }; done ) > $OUT/unit-a.txt 2>&1 &
( for t in test_family_mtp; do s=$(date +%s); timeout 150 build/tests/$t > /tmp/u-$t.log 2>&1 && echo "PASS $t ($(( $(date +%s) - s )) s)" || { echo "FAIL $t"; tail -15 /tmp/u-$t.log; }; done ) > $OUT/unit-b.txt 2>&1 &
for t in test_backend_cuda test_forward test_rows test_generate test_family_goldens test_family_layouts test_mlx_goldens test_quant_goldens test_shapes test_synth test_fwd_pool test_batch test_sched; do
  s=$(date +%s); timeout 100 build/tests/$t > /tmp/u-$t.log 2>&1 && echo "PASS $t ($(( $(date +%s) - s )) s)" || { echo "FAIL $t"; tail -15 /tmp/u-$t.log; }
done > $OUT/unit-c.txt 2>&1
grep -h "cuda_equal\|commit\|logits_top" /tmp/u-test_backend_cuda.log > $OUT/backend-cuda.txt
SKIP_UNIT=1 timeout 60 scripts/gpu-test.sh > $OUT/gpu-test-rest.txt 2>&1
wait
cat $OUT/unit-a.txt $OUT/unit-b.txt $OUT/unit-c.txt $OUT/gpu-test-rest.txt
echo "unit FAIL lines: $(cat $OUT/unit-*.txt | grep -c FAIL); all done at $(( $(date +%s) - t0 )) s"
