#!/usr/bin/env bash
# kernel.sh — session 46: the bf16 matmul kernels alone, MTPLX_BF16X=1 (even/odd packed activations)
# against =0 (widening), alternated twice: the small model's widest shape from memory (2 threads) and
# a 2 MB weight in L2 (1 thread). Output: kernel.txt beside it.
cd "$(dirname "$0")/../../.." || exit 1
{
  echo "# $(date -u) $(git rev-parse --short HEAD)"
  for round in 1 2; do
    for v in 0 1; do
      echo "## round $round MTPLX_BF16X=$v"
      MTPLX_BF16X=$v build/mtplx bench --matmul bf16 --shape 1920x640 --count 8 --rows 32 --reps 20 2>&1 | tail -33
      MTPLX_THREADS=1 MTPLX_BF16X=$v build/mtplx bench --matmul bf16 --shape 512x1024 --count 2 --rows 8 --reps 200 2>&1 | tail -9
    done
  done
} > bench/results/2026-12-07-xeon-s46/kernel.txt 2>&1
