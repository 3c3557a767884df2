#!/usr/bin/env bash
# next session: GDN rows' q / k norms and gates computed ahead of the recurrence, a row a warp, into shared
# memory (.gpu-lead/s17/gdn-precompute.patch; same functions on the same lanes, so the same bits —
# compiled, never run). Builds HEAD, keeps its binary, applies the patch, builds again; 27B-16l q4 verify
# cost 1..8 rows and 4k prefill, old / new alternated; logits of both binaries compared byte for byte
# (embedded prefill, steps, MTP; the q27 16-token prefill); then gpu-test on the patched tree.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build0.txt 2>&1 || { tail -30 $OUT/build0.txt; exit 1; }
cp build/mtplx /tmp/mtplx-head
patch -p1 < .gpu-lead/s17/gdn-precompute.patch | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build1.txt 2>&1 || { tail -30 $OUT/build1.txt; exit 1; }
echo "builds $(el) s" | tee -a $L
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1
T=100,2000,31,4096,777,12,900,345,6789,21,1500,88,4321,600,7,2500
for mode in "" "--step" "--mtp"; do
  /tmp/mtplx-head logits --tokens $T $mode --out /tmp/l0.safetensors > /dev/null; build/mtplx logits --tokens $T $mode --out /tmp/l1.safetensors > /dev/null
  echo "embedded logits [$mode]: $(cmp -s /tmp/l0.safetensors /tmp/l1.safetensors && echo same || echo DIFFER)" | tee -a $L
done
/tmp/mtplx-head logits --model /tmp/q27 --tokens $T --out /tmp/q0.safetensors > /dev/null; build/mtplx logits --model /tmp/q27 --tokens $T --out /tmp/q1.safetensors > /dev/null
echo "q27 logits: $(cmp -s /tmp/q0.safetensors /tmp/q1.safetensors && echo same || echo DIFFER)" | tee -a $L
for b in /tmp/mtplx-head build/mtplx /tmp/mtplx-head build/mtplx; do
  echo "== q27 $b: $($b bench --device cuda --model /tmp/q27 --verify-cost --rows 8 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2|4|8)-row forward' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|') $($b bench --device cuda --model /tmp/q27 --prefill 4096 --reps 2 2>&1 | tail -1)" | tee -a $L
done
