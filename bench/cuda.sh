#!/usr/bin/env bash
# CUDA benchmarks (bench/cuda.md): run on the GPU machine after `make CUDA=1` (scripts/gpu-test.sh
# builds it). Writes synthetic Qwen3.5-27B-shaped checkpoints (16 of the 64 layers: the per-layer
# shapes are the real ones, per-token figures scale with the layer count) under $SYNTH (default
# /tmp/mtplx-synth, ~17 GB for bf16, ~5 GB for q4), then:
#   - GPU read bandwidth and AR decode / verify cost at 1..8 rows (mtplx bench --membw --verify-cost)
#     for each format in $FORMATS (default "bf16 q4");
#   - the matmul kernel alone per format, stream-K (default) against the previous kernels
#     (MTPLX_CUDA_SK=0) in the same run, 1..16 rows;
#   - MTP speed on the embedded model (mtplx bench: AR vs depths 1..3, real acceptance).
# Every command is echoed before it runs, so the log is the record of what was measured.
set -euo pipefail
cd "$(dirname "$0")/.."
SYNTH=${SYNTH:-/tmp/mtplx-synth}
FORMATS=${FORMATS:-bf16 q4}
mkdir -p "$SYNTH"
run() { echo "+ $*"; "$@"; }
for sk in 0 1; do
    run env MTPLX_CUDA_SK=$sk build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 16 --rows 16 --reps 5
    run env MTPLX_CUDA_SK=$sk build/mtplx bench --device cuda --matmul q8 --shape 17408x5120 --count 8 --rows 16 --reps 5
    run env MTPLX_CUDA_SK=$sk build/mtplx bench --device cuda --matmul bf16 --shape 17408x5120 --count 4 --rows 16 --reps 5
done
for f in $FORMATS; do
    d=$SYNTH/qwen35-27b-16l-$f
    [ -f "$d/config.json" ] || run build/mtplx synth --preset qwen35-27b-16l --dtype "$f" --out "$d" --quiet
    run build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 7 --context 512 --model "$d"
done
run build/mtplx bench --device cuda --prompts 4 --max-tokens 128 --depths 0,1,2,3
