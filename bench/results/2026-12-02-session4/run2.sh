#!/usr/bin/env bash
# helper cudagraph, device call 2 (last): gpu-test.sh with the branch, then before/after benches
set -uo pipefail
git apply .gpu-cudagraph/branch.patch || { echo "PATCH FAILED"; exit 1; }
touch src/backend/cuda/*.cu src/backend/cuda/*.cuh
TESTS="test_backend_cuda test_forward test_rows test_generate test_generate_dist test_family_goldens test_family_layouts
       test_family_mtp test_mlx_goldens test_quant_goldens test_shapes test_synth test_fwd_pool test_batch test_sched"
targets="model build/mtplx"; for t in $TESTS; do targets="$targets build/tests/$t"; done
t0=$(date +%s)
scripts/device-build.sh build $targets CUDA=1 > $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; echo BUILD FAILED; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
S=/tmp/cg-synth; mkdir -p $S
nice -n 19 bash -c "[ -f $S/bf16/config.json ] || build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out $S/bf16 --quiet
  build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out $S/q4 --quiet; echo synth done" > $OUT/synth.log 2>&1 &
spid=$!
timeout 200 scripts/gpu-test.sh 2>&1 | tee $OUT/gpu-test.txt | grep -v "^PASS" | tail -40
grep -c "^PASS" $OUT/gpu-test.txt
wait $spid; cat $OUT/synth.log; echo "synth + tests $(( $(date +%s) - t0 )) s"
export MTPLX_DEVICE=cuda
OFF="env MTPLX_CUDA_GRAPH=0 MTPLX_CUDA_PDL=0 MTPLX_CUDA_FUSE=0 MTPLX_CUDA_STREAM=0"
for q in q4; do
  build/mtplx logits --model $S/$q --tokens 11,2222,333,44444,5 --step --out /tmp/q1.st >/dev/null 2>&1
  $OFF build/mtplx logits --model $S/$q --tokens 11,2222,333,44444,5 --step --out /tmp/q0.st >/dev/null 2>&1
  cmp -s /tmp/q0.st /tmp/q1.st && [ -s /tmp/q1.st ] && echo "$q logits --step: off == on" || echo "$q logits --step DIFFER"
done
B() { local f=$1; shift; env "$@" timeout 40 build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 --model $S/$f; }
OFFV="MTPLX_CUDA_GRAPH=0 MTPLX_CUDA_PDL=0 MTPLX_CUDA_FUSE=0 MTPLX_CUDA_STREAM=0"
for f in bf16 q4; do
  for c in off on off on; do
    echo "+ $f $c"; if [ $c = off ]; then B $f $OFFV; else B $f X=1; fi 2>&1 | tee -a $OUT/$f-$c.txt | grep -E "forward|AR decode"
  done
done
echo "+ bf16 attribution (1 and 8 rows): stream / +fuse / +pdl / +graph"
for cfg in "MTPLX_CUDA_GRAPH=0 MTPLX_CUDA_PDL=0 MTPLX_CUDA_FUSE=0" "MTPLX_CUDA_GRAPH=0 MTPLX_CUDA_PDL=0" "MTPLX_CUDA_GRAPH=0" "X=1"; do
  echo "  $cfg:"; env $cfg timeout 40 build/mtplx bench --device cuda --verify-cost --rows 8 --reps 5 --context 512 --model $S/bf16 2>&1 | grep -E "^ +(1|8)-row"
done
echo "+ step tables bf16 off / on"
$OFF env MTPLX_CUDA_STEPS=1 timeout 40 build/mtplx bench --device cuda --verify-cost --rows 8 --reps 3 --context 512 --model $S/bf16 2>&1 | sed -n '/mtplx CUDA steps/,$p'
MTPLX_CUDA_STEPS=1 timeout 40 build/mtplx bench --device cuda --verify-cost --rows 8 --reps 3 --context 512 --model $S/bf16 2>&1 | sed -n '/mtplx CUDA steps/,$p'
echo "+ embedded: off / stream+fuse / +pdl / all, twice"
for r in 1 2; do
  for cfg in "MTPLX_CUDA_GRAPH=0 MTPLX_CUDA_PDL=0 MTPLX_CUDA_FUSE=0 MTPLX_CUDA_STREAM=0" "MTPLX_CUDA_GRAPH=0 MTPLX_CUDA_PDL=0" "MTPLX_CUDA_GRAPH=0" "X=1"; do
    echo "  $cfg:"; env $cfg timeout 40 build/mtplx bench --device cuda --depths 0,3 2>&1 | tee -a $OUT/emb.txt | grep -E "^(AR|D3) "
  done
done
echo "+ embedded step tables off / on"
$OFF env MTPLX_CUDA_STEPS=1 timeout 30 build/mtplx bench --device cuda --verify-cost --rows 4 --reps 3 --context 64 2>&1 | sed -n '/mtplx CUDA steps/,$p'
MTPLX_CUDA_STEPS=1 timeout 30 build/mtplx bench --device cuda --verify-cost --rows 4 --reps 3 --context 64 2>&1 | sed -n '/mtplx CUDA steps/,$p'
echo "all done $(( $(date +%s) - t0 )) s"
