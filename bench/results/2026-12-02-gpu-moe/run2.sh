#!/usr/bin/env bash
# helper moe, device call 2: correctness (test_backend_cuda, the MoE goldens, batch invariance, graphs
# off == on on an MoE model, memcheck) and 35B-A3B-10l q4 / bf16 decode: device MoE vs MTPLX_CUDA_MOE=0
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
git apply .gpu-moe/branch2.patch || { echo "PATCH FAILED"; exit 1; }
touch $(git ls-files src tests/unit | grep -E "\.(c|h|cu|cuh)$")  # outputs of other helpers' patches may be newer
TESTS="test_backend_cuda test_family_goldens test_mlx_goldens test_quant_goldens test_synth test_batch test_family_mtp test_shapes"
targets="model build/mtplx"; for t in $TESTS; do targets="$targets build/tests/$t"; done
scripts/device-build.sh build $targets CUDA=1 > $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; echo BUILD FAILED; exit 1; }
echo "build $(el) s"
S=/tmp/moe; mkdir -p $S
(nice -n 19 build/mtplx synth --preset qwen35-35b-a3b-10l --dtype q4 --out $S/q4 --quiet > $OUT/synth.log 2>&1; echo "q4 done $(el)" >> $OUT/synth.log
 nice -n 19 build/mtplx synth --preset qwen35-35b-a3b-10l --dtype bf16 --out $S/bf16 --quiet >> $OUT/synth.log 2>&1; echo "bf16 done $(el)" >> $OUT/synth.log) &
export MTPLX_DEVICE=cuda
for t in $TESTS; do timeout 40 build/tests/$t > $OUT/$t.txt 2>&1; echo "$t rc $? at $(el) s: $(grep -E 'passed' $OUT/$t.txt | tail -1)"; grep -E "^FAIL|FAIL " $OUT/$t.txt | head -5; done
G=tests/data/goldens/qwen3_5_moe; TK=1,200,31,77,5,12,90,45,6,21,150,88
for m in "" "--step"; do
  MTPLX_CUDA_GRAPH=0 MTPLX_CUDA_PDL=0 MTPLX_CUDA_FUSE=0 MTPLX_CUDA_STREAM=0 timeout 20 build/mtplx logits --model $G --tokens $TK $m --out /tmp/moe-l0.st >/dev/null 2>&1
  MTPLX_CUDA_GRAPH=1 timeout 20 build/mtplx logits --model $G --tokens $TK $m --out /tmp/moe-l1.st > /dev/null 2>&1
  cmp -s /tmp/moe-l0.st /tmp/moe-l1.st && echo "moe logits [$m]: machinery off == graphs on" || echo "FAIL moe logits [$m] differ"
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 60 $SAN --tool memcheck --error-exitcode 3 --leak-check no build/mtplx logits --model $G --tokens $TK --step > $OUT/memcheck.txt 2>&1; echo "memcheck rc $? at $(el) s"; tail -2 $OUT/memcheck.txt
while ! grep -q "q4 done" $OUT/synth.log && [ $(el) -lt 110 ]; do sleep 1; done; cat $OUT/synth.log
V() { local f=$1; shift; env "$@" timeout 30 build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 --model $S/$f 2>&1; }
show() { grep -iE "bandwidth|weights read|forward|AR decode" $1 | sed 's/^ *//' | tr '\n' ';'; echo; }
if [ -f $S/q4/config.json ]; then
  V q4 X=1 > $OUT/new-q4.txt; echo "new q4 at $(el) s: $(show $OUT/new-q4.txt)"
  V q4 MTPLX_CUDA_MOE=0 > $OUT/old-q4.txt; echo "old q4 at $(el) s: $(show $OUT/old-q4.txt)"
  V q4 MTPLX_CUDA_GRAPH=1 > $OUT/graph-q4.txt; echo "graph q4 at $(el) s: $(show $OUT/graph-q4.txt)"
  MTPLX_CUDA_STEPS=1 timeout 20 build/mtplx bench --device cuda --verify-cost --rows 1 --reps 21 --context 16 --model $S/q4 > $OUT/steps-q4.txt 2>&1
  echo "steps q4 at $(el) s"; grep -v "^ *[0-9]-row\|^$" $OUT/steps-q4.txt | tail -12
fi
while ! grep -q "bf16 done" $OUT/synth.log && [ $(el) -lt 150 ]; do sleep 1; done; cat $OUT/synth.log
if grep -q "bf16 done" $OUT/synth.log; then
  V bf16 X=1 > $OUT/new-bf16.txt; echo "new bf16 at $(el) s: $(show $OUT/new-bf16.txt)"
  [ $(el) -lt 162 ] && { V bf16 MTPLX_CUDA_MOE=0 > $OUT/old-bf16.txt; echo "old bf16 at $(el) s: $(show $OUT/old-bf16.txt)"; }
  [ $(el) -lt 170 ] && { V bf16 MTPLX_CUDA_GRAPH=1 > $OUT/graph-bf16.txt; echo "graph bf16 at $(el) s: $(show $OUT/graph-bf16.txt)"; }
fi
echo "all done $(el) s"
