#!/usr/bin/env bash
# cudabatch device run 2: the branch applied, scripts/gpu-test.sh, then per-op profiles of a 64-sequence
# run with and without the batched sequence ops, and one more side-by-side alternation.
set -uo pipefail
G=.gpu-cudabatch
git apply $G/branch.patch 2>$OUT/apply.txt || patch -p1 < $G/branch.patch >> $OUT/apply.txt 2>&1 || { echo "patch failed"; cat $OUT/apply.txt; exit 1; }
touch src/backend/cuda/* src/backend/*.h src/engine/*.c src/model/*.c src/model/families/*.c src/kernels/*.c src/backend/*.c src/backend/cpu/*.c tests/unit/*.c
scripts/gpu-test.sh 2>&1 | tee $OUT/gpu-test.txt
P="--prompt-tokens 11,22,33,44,55,66,77,88 --max-tokens 64 --temperature 0.6 --seed 1"
for sb in 1 0; do echo "=== profile, embedded, depth 3, 64 samples, MTPLX_CUDA_SEQ_BATCH=$sb"
    MTPLX_CUDA_PROFILE=1 MTPLX_CUDA_SEQ_BATCH=$sb timeout 30 build/mtplx run --device cuda $P --depth 3 --samples 64 \
        --parallel --max-seqs 64 2>&1 >/dev/null | grep -v "^\[prompt" | grep -v "^$"; done > $OUT/prof.txt 2>&1
for n in 1 8 16 64; do for sb in 1 0; do echo -n "emb n=$n seq_batch=$sb: "
    MTPLX_CUDA_SEQ_BATCH=$sb timeout 30 build/mtplx run --device cuda $P --depth 3 --samples $n --parallel --max-seqs 64 \
        2>&1 >/dev/null | grep aggregate; done; done
S=/tmp/s27
if [ -f $S/config.json ]; then for n in 1 8 64; do for sb in 1 0; do echo -n "27b-16l bf16 n=$n seq_batch=$sb: "
    MTPLX_CUDA_SEQ_BATCH=$sb timeout 60 build/mtplx run --device cuda --model $S $P --depth 0 --samples $n --parallel \
        --max-seqs 64 2>&1 >/dev/null | grep aggregate; done; done
    for sb in 1 0; do echo "=== profile, 27b-16l bf16, depth 0, 64 samples, MTPLX_CUDA_SEQ_BATCH=$sb"
    MTPLX_CUDA_PROFILE=1 MTPLX_CUDA_SEQ_BATCH=$sb timeout 60 build/mtplx run --device cuda --model $S $P --depth 0 --samples 64 \
        --parallel --max-seqs 64 2>&1 >/dev/null | grep -v "^\[prompt" | grep -v "^$"; done > $OUT/prof27.txt 2>&1
else echo "no /tmp/s27 (fresh machine): 27B side by side skipped"; fi
echo done
