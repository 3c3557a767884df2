#!/usr/bin/env bash
# session 15 call 4: this tree (GDN step split / side by side / warp_sum8, and k_sk_q's xdb loads as one
# 16-byte load per two groups) against 99c050f's CUDA sources (the session's start; built in /tmp/old
# from this tree with call4-since-99c050f.patch reversed): logits of the 27B-16l q4 (prefill and steps) and
# of the embedded model in bf16 / q4 compared bit for bit; bench --matmul q4 g64 / g32, q8 g64 at 1..16
# rows and the 27B verify cost, alternated
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt; D=bench/results/2026-12-04-gpu-session15
el() { echo $(( $(date +%s)-t0 )); }
rm -rf /tmp/old && mkdir /tmp/old && cp -a . /tmp/old/ && (cd /tmp/old && patch -s -R -p1 < $D/call4-since-99c050f.patch) || { echo "patch failed"; exit 1; }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
(cd /tmp/old && scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/old-build.txt 2>&1) || { tail -20 /tmp/old-build.txt; exit 1; }
echo "builds $(el) s" | tee -a $L
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1
build/mtplx convert --q-bits 4 --out /tmp/e4 --quiet > /dev/null 2>&1
T=$(seq -s, 101 116); T2=$(seq -s, 11 37 3674)
for b in new old; do B=build/mtplx; [ $b = old ] && B=/tmp/old/build/mtplx
  $B logits --device cuda --model /tmp/q27 --tokens $T --out /tmp/$b-q.safetensors > /dev/null 2>&1
  $B logits --device cuda --model /tmp/q27 --tokens $T --step --out /tmp/$b-qs.safetensors > /dev/null 2>&1
  $B logits --device cuda --tokens $T2 --mtp --out /tmp/$b-e.safetensors > /dev/null 2>&1
  $B logits --device cuda --model /tmp/e4 --tokens $T2 --mtp --out /tmp/$b-e4.safetensors > /dev/null 2>&1
  $B logits --device cuda --model /tmp/e4 --tokens $T2 --step --out /tmp/$b-e4s.safetensors > /dev/null 2>&1
done
for f in q qs e e4 e4s; do cmp -s /tmp/new-$f.safetensors /tmp/old-$f.safetensors && echo "logits $f: this tree == 99c050f" | tee -a $L || echo "logits $f: DIFFER from 99c050f" | tee -a $L; done
echo "checks $(el) s" | tee -a $L
for k in 1 2; do for b in new old; do B=build/mtplx; [ $b = old ] && B=/tmp/old/build/mtplx
  for f in q4:64:16 q4:32:16 q8:64:8; do IFS=: read fmt gs cnt <<< "$f"
    echo "== $b $fmt g$gs: $(timeout 40 $B bench --device cuda --matmul $fmt --group-size $gs --shape 17408x5120 --count $cnt --rows 16 --reps 5 2>&1 | grep -E 'T=(1|2|4|8|9|16) ' | awk '{printf "T%s %s | ", substr($1,3), $4}')" | tee -a $L
  done
  echo "== $b q27: $(timeout 60 $B bench --device cuda --model /tmp/q27 --verify-cost --rows 8 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '(1|2|4|8)-row forward|AR decode' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|' | cut -c1-300)" | tee -a $L
done; done
echo "bench $(el) s" | tee -a $L
