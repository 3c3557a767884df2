#!/usr/bin/env bash
# bench-2b decode, Zen's kernel path (MTPLX_KERNEL=avx512) beside the default (amx) on this Xeon, alternated
cd /work/main
for round in 1 2; do
  for f in bf16 q8 q4; do
    for k in avx512 amx; do
      echo "== round $round $f kernel $k"
      MTPLX_KERNEL=$k build/mtplx bench --membw --verify-cost --rows 4 --reps 7 --context 256 --model /tmp/b2-$f 2>&1 | grep -E "kernel|bandwidth|row forward|AR decode|with the seq"
    done
  done
done
