#!/usr/bin/env bash
# session 31: MTP on the embedded model, AVX2-only path against amx, alternated twice (idle, 2 threads)
for round in 1 2; do
  for k in avx2 amx; do
    echo "$k: $(MTPLX_KERNEL=$k build/mtplx bench --depths 0,2,3 --temperature 0.6 --prompts 8 --max-tokens 128 2>&1 | grep -E '^(AR|D[0-9]) ' | tr -s ' ' | tr '\n' ' ')"
  done
done
