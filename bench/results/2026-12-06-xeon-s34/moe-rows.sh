#!/usr/bin/env bash
# Session 34: the CPU MoE's per-row work around the expert matmuls (SwiGLU through the SIMD kern_swiglu; the
# window's row gather and weighted sum split over the pool) — binary before (/tmp/mtplx-before, e2edcfa) and
# after, alternated, on the synthetic 35B-A3B-10l q4 (`mtplx synth --preset qwen35-35b-a3b-10l --dtype q4`).
set -u
M=${M:-/tmp/moe10}
for r in 1 2; do
  for b in before after; do
    for n in 512 2048; do echo "r$r $b prefill $n: $(/tmp/mtplx-$b bench --prefill $n --model $M 2>&1 | tail -1)"; done
    echo "r$r $b decode: $(/tmp/mtplx-$b bench --membw --verify-cost --rows 2 --reps 5 --context 256 --model $M 2>&1 | grep -E 'AR decode|2-row')" 
  done
done
