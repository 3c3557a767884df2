#!/usr/bin/env bash
# (the tree of this call had call7-gdn-quad.patch applied; reverted after it: see bench/cuda.md "Session 14")
# session 14 call 7: the GDN step's quad layout for Dk = 128 (MTPLX_CUDA_GDN_QUAD=1, default) against a lane
# per key entry (=0): its tests (test_backend_cuda's Dk 128 replay / CPU case, test_synth's Dk 128 model:
# prefill == steps, commit), the 27B-16l q4 logits with GDN_L2=0 == default == --step, verify 1..8 rows
# and 4k prefill alternated; then as much of scripts/gpu-test.sh as the device time left allows
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda build/tests/test_synth > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1) &
for t in test_backend_cuda test_synth; do MTPLX_DEVICE=cuda timeout 60 build/tests/$t > $OUT/$t.txt 2>&1; echo "$t rc=$? $(tail -1 $OUT/$t.txt)" | tee -a $L; grep -E "FAIL|gdn" $OUT/$t.txt | head -5 | tee -a $L; done
wait; tail -1 /tmp/synth.txt | tee -a $L
T=$(seq -s, 101 116)
build/mtplx logits --device cuda --model /tmp/q27 --tokens $T --out /tmp/l1.safetensors > /dev/null 2>&1
MTPLX_CUDA_GDN_L2=0 build/mtplx logits --device cuda --model /tmp/q27 --tokens $T --out /tmp/l2.safetensors > /dev/null 2>&1
build/mtplx logits --device cuda --model /tmp/q27 --tokens $T --step --out /tmp/l3.safetensors > /dev/null 2>&1
MTPLX_CUDA_GDN_QUAD=0 build/mtplx logits --device cuda --model /tmp/q27 --tokens $T --out /tmp/l4.safetensors > /dev/null 2>&1
cmp -s /tmp/l1.safetensors /tmp/l2.safetensors && echo "q27: GDN_L2=0 == default" | tee -a $L || echo "q27: GDN_L2=0 DIFFERS" | tee -a $L
cmp -s /tmp/l1.safetensors /tmp/l3.safetensors && echo "q27: prefill == steps" | tee -a $L || echo "q27: prefill DIFFERS from steps" | tee -a $L
cmp -s /tmp/l1.safetensors /tmp/l4.safetensors && echo "q27: quad == lanes (same bits?!)" | tee -a $L || echo "q27: quad != lanes (expected: other sums' order)" | tee -a $L
echo "checks $(el) s" | tee -a $L
for k in 1 2; do for qd in 1 0; do
  echo "== q27 quad=$qd: $(MTPLX_CUDA_GDN_QUAD=$qd timeout 60 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 8 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2|4|8)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-300)" | tee -a $L
done; done
for qd in 1 0; do
  echo "== q27 prefill 4096 quad=$qd: $(MTPLX_CUDA_GDN_QUAD=$qd timeout 60 build/mtplx bench --device cuda --model /tmp/q27 --prefill 4096 --reps 2 2>&1 | tail -1)" | tee -a $L
done
echo "bench $(el) s" | tee -a $L
left=$(( 175 - $(el) )); [ $left -gt 20 ] && { timeout $left bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? (limit $left s) $(el) s" | tee -a $L; grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L; }
