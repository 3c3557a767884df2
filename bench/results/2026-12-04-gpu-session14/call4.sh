#!/usr/bin/env bash
# (the tree of this call had the GDN change that was then reverted: row loop without a branch, norms every 8 rows)
# session 14 call 4: the GDN step's rows without a branch between a warp's value rows and with the
# outputs' gated RMSNorm taken off the state's chain (every 8 rows at once), against HEAD's cuda_seq.cu
# (/tmp/orig: this tree with .gpu-lead/s14/orig_seq.cu = `git show HEAD:src/backend/cuda/cuda_seq.cu`),
# alternated: 27B-16l q4 verify 1..16 rows and 4k prefill, the small-model shape (random weights) and the
# embedded model; then scripts/gpu-test.sh
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
rm -rf /tmp/orig && mkdir /tmp/orig && tar --exclude=./build --exclude=./.gpu-lead -cf - . | tar -xf - -C /tmp/orig
mkdir -p /tmp/orig/build && cp -r build/device-debs /tmp/orig/build/ && cp .gpu-lead/s14/orig_seq.cu /tmp/orig/src/backend/cuda/cuda_seq.cu
(cd /tmp/orig && scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/orig-build.txt 2>&1) &
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
wait; [ -x /tmp/orig/build/mtplx ] || { tail -30 /tmp/orig-build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
O=/tmp/orig/build/mtplx N=build/mtplx
(timeout 150 $N synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth27.txt 2>&1) &
$N synth --config .gpu-lead/small-config.json --dtype bf16 --out /tmp/small --quiet > /tmp/synths.txt 2>&1
P='def quicksort(arr):'
for m in models/qwen35-tiny-code /tmp/small; do for d in 0 3; do
  $N run --device cuda --model $m --prompt "$P" --max-tokens 48 --temperature 0 --depth $d --quiet > /tmp/n-$d.txt 2>&1
  $O run --device cuda --model $m --prompt "$P" --max-tokens 48 --temperature 0 --depth $d --quiet > /tmp/o-$d.txt 2>&1
done; cmp -s /tmp/n-0.txt /tmp/o-0.txt && cmp -s /tmp/n-3.txt /tmp/o-3.txt && cmp -s /tmp/n-0.txt /tmp/n-3.txt && echo "$m: greedy AR / D3 text same as HEAD's" | tee -a $L || echo "$m: TEXT DIFFERS" | tee -a $L; done
for k in 1 2; do for m in /tmp/small models/qwen35-tiny-code; do for v in orig new; do
  b=$N; [ $v = orig ] && b=$O
  echo "== $(basename $m) $v: $(timeout 60 $b bench --device cuda --model $m --verify-cost --rows 16 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2|4|8|9|16)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-300)" | tee -a $L
done; done; done
for v in orig new orig new; do b=$N; [ $v = orig ] && b=$O
  echo "== emb prefill 4096 $v: $(timeout 60 $b bench --device cuda --prefill 4096 2>&1 | tail -1)" | tee -a $L
done
wait; tail -1 /tmp/synth27.txt | tee -a $L
for k in 1 2; do for v in orig new; do b=$N; [ $v = orig ] && b=$O
  echo "== q27 $v: $(timeout 100 $b bench --device cuda --model /tmp/q27 --verify-cost --rows 16 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2|4|8|9|16)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-300)" | tee -a $L
done; done
for v in orig new; do b=$N; [ $v = orig ] && b=$O
  echo "== q27 prefill 4096 $v: $(timeout 100 $b bench --device cuda --model /tmp/q27 --prefill 4096 --reps 2 2>&1 | tail -1)" | tee -a $L
done
echo "bench $(el) s" | tee -a $L
timeout 300 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^FAIL|failed|differ" $OUT/gpu-test.txt | tee -a $L
