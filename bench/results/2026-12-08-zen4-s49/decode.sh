#!/usr/bin/env bash
# session 49 (lead): issue 17's decode bars on a Zen 4 VM (family 25 model 17) at the current tree — bench-2b AR read share and
# verify 4 rows ÷ 1 in each format, alternated twice (2 threads, kernel path avx512)
OUT=${1:?out}; cd /work/main
for r in 1 2; do for d in q4 q8 bf16; do
  echo "== round $r $d $(date +%T)"
  build/mtplx bench --membw --verify-cost --rows 4 --reps 7 --context 256 --model /tmp/bench-2b-$d 2>&1 | grep -E "forward|AR decode|bandwidth|read|GB/s" 
done; done > $OUT/decode.txt 2>&1
