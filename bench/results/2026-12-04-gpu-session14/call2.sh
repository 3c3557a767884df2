#!/usr/bin/env bash
# (.gpu-lead/s14/orig_sk.cu was `git show 147302b:src/backend/cuda/cuda_mma_sk.cu`, this repo's own HEAD kernel)
# session 14 call 2: HEAD's stream-K q kernel (147302b, built in /tmp/orig) against this tree's, default
# (group pieces, GA=1) and MTPLX_CUDA_SK_GA=0 (masked quarters; predicated loads as HEAD), alternated:
# the matmul alone (q4 / q8, groups 32 / 64 / 128, 17408x5120, rows 1..16); 27B-16l q4 AR + verify; the
# embedded model q4 / q8 AR and D3
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
rm -rf /tmp/orig && mkdir /tmp/orig && tar --exclude=./build --exclude=./.gpu-lead -cf - . | tar -xf - -C /tmp/orig
mkdir -p /tmp/orig/build && cp -r build/device-debs /tmp/orig/build/ && cp .gpu-lead/s14/orig_sk.cu /tmp/orig/src/backend/cuda/cuda_mma_sk.cu
(cd /tmp/orig && scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/orig-build.txt 2>&1) &
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
wait; [ -x /tmp/orig/build/mtplx ] || { tail -30 /tmp/orig-build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(timeout 150 build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth27.txt 2>&1) &
O=/tmp/orig/build/mtplx N=build/mtplx
mm() { grep -E 'T=(1|2|4|8|9|16) ' $1 | awk '{printf "T%s %s | ", substr($1,3), $4}'; }
for k in 1 2; do
  for f in q4:64:16 q4:32:16 q4:128:16 q8:64:8 q8:32:8; do
    IFS=: read fmt gs cnt <<< "$f"
    for v in orig ga1 ga0; do
      b=$N; [ $v = orig ] && b=$O; ga=1; [ $v = ga0 ] && ga=0
      o=$OUT/mm-$fmt-g$gs-$v-k$k.txt
      MTPLX_CUDA_SK_GA=$ga timeout 40 $b bench --device cuda --matmul $fmt --group-size $gs --shape 17408x5120 --count $cnt --rows 16 --reps 5 > $o 2>&1
      echo "== $fmt g$gs $v: $(mm $o)" | tee -a $L
    done
  done
done
echo "matmul $(el) s" | tee -a $L
wait; tail -1 /tmp/synth27.txt | tee -a $L
for k in 1 2; do for v in orig ga1; do
  b=$N; [ $v = orig ] && b=$O
  echo "== 27B q4 $v: $(timeout 100 $b bench --device cuda --model /tmp/q27 --membw --verify-cost --rows 8 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E 'row forward|AR decode|GB/s' | tr -s ' ' | tr '\n' '|' | cut -c1-700)" | tee -a $L
done; done
echo "27B $(el) s" | tee -a $L
cp -r models/qwen35-tiny-code /tmp/emb && rm -f /tmp/emb/*.xz /tmp/emb/golden.safetensors
$N convert --q-bits 4 --out /tmp/emb-q4 --model /tmp/emb --quiet; $N convert --q-bits 8 --out /tmp/emb-q8 --model /tmp/emb --quiet
cp /tmp/emb/val_code.txt /tmp/emb-q4/; cp /tmp/emb/val_code.txt /tmp/emb-q8/
for k in 1 2; do for v in orig ga1; do for m in /tmp/emb-q8 /tmp/emb-q4; do
  b=$N; [ $v = orig ] && b=$O
  echo "== $v $(basename $m): $(timeout 60 $b bench --device cuda --model $m --depths 0,3 2>&1 | grep -E '^(AR|D3)' | awk '{printf "%s %s ", $1, $2}')"
done; done; done | tee -a $L
echo "total $(el) s" | tee -a $L
cd $OUT && tar cJf mm.tar.xz mm-*.txt && rm -f mm-*.txt
