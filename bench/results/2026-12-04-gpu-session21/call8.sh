#!/usr/bin/env bash
# session 21 call 8: 1 / 8 / 64 streams through the scheduler on the 27B-16l bf16 shape (session 11's
# command, 512 tokens each), AR, HEAD with the grouped attention
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
timeout 150 build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/b27 --quiet 2>&1 | tail -1 | tee -a $L
echo "synth $(el) s" | tee -a $L
P="--prompt-tokens 11,22,33,44,55,66,77,88 --max-tokens 512 --temperature 0.6 --top-k 20 --top-p 0.95 --seed 1"
for d in 0; do for n in 1 8 64; do
  echo "== 27B bf16 depth $d samples $n: $(timeout 100 build/mtplx run --device cuda --model /tmp/b27 $P --depth $d --samples $n --parallel --max-seqs 64 --quiet 2>&1 >/dev/null | tail -1 | cut -c1-200)" | tee -a $L
done; done
echo "total $(el) s" | tee -a $L
