#!/usr/bin/env bash
# session 15 call 2: the register GDN step's heads split over several blocks (gdn_split, norm in its own
# launch; same bits): test_backend_cuda (Dk 128 case with its own arrays now), test_rows, test_synth; the
# 27B-16l q4 verify cost 1..8 rows and the 4k prefill with MTPLX_CUDA_GDN_SPLIT=1 (one block a head, as
# before) against the default (auto) and 16, alternated; logits prefill == steps; then scripts/gpu-test.sh
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt; R=bench/results/2026-12-04-gpu-session15
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda build/tests/test_rows build/tests/test_synth > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1) &
for t in test_backend_cuda test_rows test_synth; do MTPLX_DEVICE=cuda timeout 60 build/tests/$t > $OUT/$t.txt 2>&1; echo "$t rc=$? $(tail -1 $OUT/$t.txt)" | tee -a $L; grep -E "FAIL" $OUT/$t.txt | head -5 | tee -a $L; done
wait; tail -1 /tmp/synth.txt | tee -a $L
T=$(seq -s, 101 116)
MTPLX_CUDA_GDN_SPLIT=1 build/mtplx logits --device cuda --model /tmp/q27 --tokens $T --out /tmp/l0.safetensors > /dev/null 2>&1
build/mtplx logits --device cuda --model /tmp/q27 --tokens $T --out /tmp/l1.safetensors > /dev/null 2>&1
build/mtplx logits --device cuda --model /tmp/q27 --tokens $T --step --out /tmp/l3.safetensors > /dev/null 2>&1
cmp -s /tmp/l0.safetensors /tmp/l1.safetensors && echo "q27: split == one block a head" | tee -a $L || echo "q27: split DIFFERS" | tee -a $L
python3 $R/cmp_logits.py /tmp/l1.safetensors /tmp/l3.safetensors 2>&1 | sed 's/^/q27 prefill vs steps: /' | tee -a $L
echo "checks $(el) s" | tee -a $L
for k in 1 2; do for sp in 1 0 16; do
  e="MTPLX_CUDA_GDN_SPLIT=$sp"; [ $sp = 0 ] && e="MTPLX_CUDA_GDN_SPLIT="
  echo "== q27 split=$sp: $(env $e timeout 60 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 8 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2|4|8)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-300)" | tee -a $L
done; done
for sp in 1 0 16 1 0; do
  e="MTPLX_CUDA_GDN_SPLIT=$sp"; [ $sp = 0 ] && e="MTPLX_CUDA_GDN_SPLIT="
  echo "== q27 prefill 4096 split=$sp: $(env $e timeout 60 build/mtplx bench --device cuda --model /tmp/q27 --prefill 4096 --reps 2 2>&1 | tail -1)" | tee -a $L
done
echo "bench $(el) s" | tee -a $L
left=$(( 570 - $(el) )); [ $left -gt 60 ] && { timeout $left bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? (limit $left s) $(el) s" | tee -a $L; grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L; }
