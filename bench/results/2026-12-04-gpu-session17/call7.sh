#!/usr/bin/env bash
# session 17 call 7: the rmsnorm kernels ask L2 for their weight before the PDL wait (MTPLX_CUDA_RMS_PF=0 / 1),
# 27B-16l q4 and embedded; then gpu-test on the final tree
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
T="build/tests/test_backend_cuda build/tests/test_forward build/tests/test_rows build/tests/test_generate build/tests/test_generate_dist build/tests/test_family_goldens build/tests/test_family_layouts build/tests/test_family_mtp build/tests/test_mlx_goldens build/tests/test_quant_goldens build/tests/test_shapes build/tests/test_synth build/tests/test_fwd_pool build/tests/test_batch build/tests/test_sched"
scripts/device-build.sh build CUDA=1 model build/mtplx $T > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1; tail -n1 /tmp/synth.txt | tee -a $L
for f in 0 1 0 1 0 1; do
  echo "== q27 RMS_PF=$f: $(MTPLX_CUDA_RMS_PF=$f timeout 60 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 8 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2|4|8)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-220)" | tee -a $L
done
for f in 0 1; do
  echo "== embedded RMS_PF=$f: $(MTPLX_CUDA_RMS_PF=$f timeout 60 build/mtplx bench --device cuda --depths 0,3 --temperature 0.6 --prompts 8 --repeats 1 2>&1 | grep -E 'bench pass' | tr -s ' ' | cut -c1-200)" | tee -a $L
done
echo "bench $(el) s" | tee -a $L
timeout $(( 570 - $(el) )) bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | cut -c1-1800 | tee -a $L
