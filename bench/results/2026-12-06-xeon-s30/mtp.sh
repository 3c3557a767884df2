#!/usr/bin/env bash
cd /work/main
for round in 1 2; do
  for k in avx512 amx; do
    echo "== round $round kernel $k"
    MTPLX_KERNEL=$k build/mtplx bench --depths 0,2,3 --temperature 0.6 --prompts 8 --max-tokens 128 2>&1 | grep -E "^ *D?[0-9] |depth|xAR|kernel" | head -8
  done
done
