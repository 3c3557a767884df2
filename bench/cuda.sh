#!/usr/bin/env bash
# CUDA benchmarks (bench/cuda.md): run on the GPU machine after `make CUDA=1` (scripts/gpu-test.sh
# builds it). Writes synthetic Qwen3.5-27B-shaped checkpoints (16 of the 64 layers: the per-layer
# shapes are the real ones, per-token figures scale with the layer count) under $SYNTH (default
# /tmp/mtplx-synth, ~17 GB for bf16, ~5 GB for q4), then:
#   - GPU read bandwidth and AR decode / verify cost at 1..8 rows (mtplx bench --membw --verify-cost)
#     for each format in $FORMATS (default "bf16 q4");
#   - the q4 1-row matmul on the mma kernel against the integer pipe, and at four sizes (a launch's
#     fixed cost);
#   - the matmul kernel alone per format, stream-K (default) against the previous kernels
#     (MTPLX_CUDA_SK=0) in the same run, 1..16 rows;
#   - per format, the D3 cycle through `run` (random weights: D3 accepts nothing, so its tok/s is one token
#     a cycle) with the full draft head and over 32768 ids (--draft-vocab: ids 0..32767 on a synthetic
#     checkpoint), and the draft step alone (bench --draft-cost, q4 draft full / q4@32768);
#   - per format, the 4,096-token prefill; in q4 also with the GDN's bf16 b / a projections on the
#     stream-K kernels (MTPLX_CUDA_THIN=0) against the thin kernel (default);
#   - MTP speed on the embedded model (mtplx bench: AR vs depths 1..3, real acceptance), with step graphs
#     off (default) and on (MTPLX_CUDA_GRAPH=1, with the step table's host / GPU ms per forward);
#   - a random-weight model at qwen35-small-code's shapes (bench/configs/qwen35-small-code.json, its
#     config.json): verify forwards of 1..32 rows with the bf16 row groups side by side (default) and in
#     each warp (MTPLX_CUDA_SK_RG=0), and prefill at 48..128 rows with small weights on stream-K to 127
#     rows (default) against the GEMM from 48 (MTPLX_CUDA_GEMM_MIN=48) (bench/cuda.md "Session 18").
# Every command is echoed before it runs, so the log is the record of what was measured.
set -euo pipefail
cd "$(dirname "$0")/.."
SYNTH=${SYNTH:-/tmp/mtplx-synth}
FORMATS=${FORMATS:-bf16 q4}
mkdir -p "$SYNTH"
run() { echo "+ $*"; "$@"; }
# the q4 1-row launch: mma kernel (MTPLX_CUDA_SK_DP=0) against the integer pipe (default), and what a
# launch costs by size (bench/cuda.md "Session 16": ~6 us + the bytes at ~3.1 TB/s)
for dp in 0 1; do
    run env MTPLX_CUDA_SK_DP=$dp build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 16 --rows 2 --reps 5
done
for shape in 1024x5120:64 6144x5120:32 69632x5120:4 248320x5120:1; do
    run build/mtplx bench --device cuda --matmul q4 --shape "${shape%:*}" --count "${shape#*:}" --rows 1 --reps 5
done
for sk in 0 1; do
    run env MTPLX_CUDA_SK=$sk build/mtplx bench --device cuda --matmul q4 --shape 17408x5120 --count 16 --rows 16 --reps 5
    run env MTPLX_CUDA_SK=$sk build/mtplx bench --device cuda --matmul q8 --shape 17408x5120 --count 8 --rows 16 --reps 5
    run env MTPLX_CUDA_SK=$sk build/mtplx bench --device cuda --matmul bf16 --shape 17408x5120 --count 4 --rows 16 --reps 5
done
for f in $FORMATS; do
    d=$SYNTH/qwen35-27b-16l-$f
    [ -f "$d/config.json" ] || run build/mtplx synth --preset qwen35-27b-16l --dtype "$f" --out "$d" --quiet
    run build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 7 --context 512 --model "$d"
    for dv in 0 32768; do
        for depth in 0 3; do
            run build/mtplx run --device cuda --model "$d" --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 300 \
                --temperature 0.6 --top-k 20 --top-p 0.95 --depth $depth --draft-vocab $dv
        done
    done
    run build/mtplx bench --device cuda --draft-cost --model "$d" --draft-quants q4,q4@32768 --steps 60 --chain 3 --context 4
    run build/mtplx bench --device cuda --model "$d" --prefill 4096 --reps 2
    [ "$f" = bf16 ] || run env MTPLX_CUDA_THIN=0 build/mtplx bench --device cuda --model "$d" --prefill 4096 --reps 2
done
run build/mtplx bench --device cuda --prompts 4 --max-tokens 128 --depths 0,1,2,3
run env MTPLX_CUDA_GRAPH=1 MTPLX_CUDA_STEPS=1 build/mtplx bench --device cuda --prompts 4 --max-tokens 128 --depths 0,1,2,3
sm=$SYNTH/small-code-shape
[ -f "$sm/config.json" ] || run build/mtplx synth --config bench/configs/qwen35-small-code.json --out "$sm" --quiet
for rg in 0 1; do
    run env MTPLX_CUDA_SK_RG=$rg build/mtplx bench --device cuda --model "$sm" --verify-cost --rows 32 --reps 5 --context 256 --logits-top 20
done
for n in 48 64 128; do
    run build/mtplx bench --device cuda --model "$sm" --prefill $n --reps 3
    run env MTPLX_CUDA_GEMM_MIN=48 build/mtplx bench --device cuda --model "$sm" --prefill $n --reps 3
done
