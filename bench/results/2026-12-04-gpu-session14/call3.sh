#!/usr/bin/env bash
# (.gpu-lead/s14/orig_sk.cu was `git show 147302b:src/backend/cuda/cuda_mma_sk.cu`, this repo's own HEAD kernel)
# session 14 call 3: the layout chosen per launch (sk_q_ga: group pieces for 9..16 rows and q4 g32 at
# 1..2 rows, masked quarters otherwise) against HEAD (147302b, /tmp/orig), alternated: the matmul alone,
# 27B-16l q4 with groups of 64 and of 32 (AR + verify 1..16 rows), the embedded model q4 / q8; then
# scripts/gpu-test.sh (its check 7 forces each layout: same bits)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
rm -rf /tmp/orig && mkdir /tmp/orig && tar --exclude=./build --exclude=./.gpu-lead -cf - . | tar -xf - -C /tmp/orig
mkdir -p /tmp/orig/build && cp -r build/device-debs /tmp/orig/build/ && cp .gpu-lead/s14/orig_sk.cu /tmp/orig/src/backend/cuda/cuda_mma_sk.cu
(cd /tmp/orig && scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/orig-build.txt 2>&1) &
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
wait; [ -x /tmp/orig/build/mtplx ] || { tail -30 /tmp/orig-build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(timeout 150 build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth27.txt 2>&1;
 timeout 150 build/mtplx synth --preset qwen35-27b-16l --dtype q4 --group-size 32 --out /tmp/q27g32 --quiet >> /tmp/synth27.txt 2>&1) &
O=/tmp/orig/build/mtplx N=build/mtplx
mm() { grep -E 'T=(1|2|4|8|9|16) ' $1 | awk '{printf "T%s %s | ", substr($1,3), $4}'; }
for k in 1 2; do
  for f in q4:64:16 q4:32:16 q8:64:8; do
    IFS=: read fmt gs cnt <<< "$f"
    for v in orig new; do
      b=$N; [ $v = orig ] && b=$O
      o=$OUT/mm-$fmt-g$gs-$v-k$k.txt
      timeout 40 $b bench --device cuda --matmul $fmt --group-size $gs --shape 17408x5120 --count $cnt --rows 16 --reps 5 > $o 2>&1
      echo "== $fmt g$gs $v: $(mm $o)" | tee -a $L
    done
  done
done
echo "matmul $(el) s" | tee -a $L
wait; tail -2 /tmp/synth27.txt | tee -a $L
for k in 1 2; do for m in /tmp/q27 /tmp/q27g32; do for v in orig new; do
  b=$N; [ $v = orig ] && b=$O
  echo "== $(basename $m) $v: $(timeout 100 $b bench --device cuda --model $m --verify-cost --rows 16 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2|4|8|9|12|16)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-400)" | tee -a $L
done; done; done
echo "27B $(el) s" | tee -a $L
cp -r models/qwen35-tiny-code /tmp/emb && rm -f /tmp/emb/*.xz /tmp/emb/golden.safetensors
$N convert --q-bits 4 --out /tmp/emb-q4 --model /tmp/emb --quiet; $N convert --q-bits 8 --out /tmp/emb-q8 --model /tmp/emb --quiet
cp /tmp/emb/val_code.txt /tmp/emb-q4/; cp /tmp/emb/val_code.txt /tmp/emb-q8/
for k in 1 2; do for v in orig new; do for m in /tmp/emb-q8 /tmp/emb-q4; do
  b=$N; [ $v = orig ] && b=$O
  echo "== $v $(basename $m): $(timeout 60 $b bench --device cuda --model $m --depths 0,3 2>&1 | grep -E '^(AR|D3)' | awk '{printf "%s %s ", $1, $2}')"
done; done; done | tee -a $L
echo "emb $(el) s" | tee -a $L
timeout 300 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(FAIL)|failed|differ|group pieces" $OUT/gpu-test.txt | tee -a $L
cd $OUT && tar cJf mm.tar.xz mm-*.txt && rm -f mm-*.txt
