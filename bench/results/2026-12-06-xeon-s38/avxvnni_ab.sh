#!/usr/bin/env bash
# The AVX2 path's packed q4 / q8 kernel with and without AVX-VNNI (MTPLX_AVXVNNI=0|1), alternated, on
# the CPU this runs on (forced to the AVX2 path: MTPLX_KERNEL=avx2). B2 = a directory holding
# bench-2b checkpoints q4 and q8 as B2/q4, B2/q8 (mtplx synth --preset bench-2b --dtype q4|q8).
# Output: one log per round on stdout.
set -u
B2=${1:?usage: avxvnni_ab.sh B2DIR [ROUNDS]}
ROUNDS=${2:-2}
bin=build/mtplx
lscpu | grep -E "Model name|^CPU\(s\)"
git log --oneline -1
for r in $(seq 1 "$ROUNDS"); do
    for v in 0 1; do
        echo "### round $r MTPLX_AVXVNNI=$v"
        for f in q4 q8; do
            echo "## matmul $f, L2-resident (1 thread, 1 x [1024 x 2048])"
            MTPLX_THREADS=1 MTPLX_KERNEL=avx2 MTPLX_AVXVNNI=$v $bin bench --matmul $f --shape 1024x2048 --count 1 --rows 8 --reps 15
            echo "## matmul $f, from DRAM (2 threads, 20 x [12352 x 2048])"
            MTPLX_KERNEL=avx2 MTPLX_AVXVNNI=$v $bin bench --matmul $f --rows 8 --reps 5
            echo "## bench-2b $f verify cost"
            MTPLX_KERNEL=avx2 MTPLX_AVXVNNI=$v $bin bench --membw --verify-cost --rows 4 --reps 7 --model "$B2/$f"
            echo "## bench-2b $f prefill 512"
            MTPLX_KERNEL=avx2 MTPLX_AVXVNNI=$v $bin bench --prefill 512 --reps 3 --model "$B2/$f"
        done
    done
done
