#!/usr/bin/env bash
# session 31: bench-2b decode on the AVX2-only kernel path (MTPLX_KERNEL=avx2) against the default here (amx)
# on the Intel Xeon VM, alternated, idle machine, 2 threads. Models from `build/mtplx synth --preset
# bench-2b --dtype q4|q8|bf16 --out /tmp/b2-<fmt>`.
for round in 1 2; do
  for f in q4 q8 bf16; do
    for k in avx2 amx; do
      echo "$f $k: $(MTPLX_KERNEL=$([ $k = avx2 ] && echo avx2 || echo amx) build/mtplx bench --membw --verify-cost --rows 4 --reps 5 --context 256 --model /tmp/b2-$f 2>&1 | grep -E 'row forward|AR decode|read' | tr -s ' ' | tr '\n' ' ')"
    done
  done
done
