#!/usr/bin/env bash
# cudabatch device run 1: the branch applied, CUDA build, the batched-op unit check, then side by side
# MTPLX_CUDA_SEQ_BATCH=1 (batched sequence ops) / 0 (per-sequence calls). Everything goes under $OUT.
set -uo pipefail
G=.gpu-cudabatch
git apply $G/branch.patch 2>$OUT/apply.txt || patch -p1 < $G/branch.patch >> $OUT/apply.txt 2>&1 || { echo "patch failed"; cat $OUT/apply.txt; exit 1; }
touch src/backend/cuda/* src/backend/*.h src/engine/*.c src/model/*.c src/model/families/*.c src/kernels/*.c src/backend/*.c src/backend/cpu/*.c tests/unit/*.c
t0=$(date +%s)
scripts/device-build.sh build model build/mtplx build/tests/test_backend_cuda CUDA=1 > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
timeout 60 build/tests/test_backend_cuda 2>&1 | tee $OUT/test_backend_cuda.txt
P="--prompt-tokens 11,22,33,44,55,66,77,88 --max-tokens 64 --temperature 0.6 --seed 1"
emb() { # emb N MODE TAG
    echo -n "emb n=$1 seq_batch=$2: "
    MTPLX_CUDA_SEQ_BATCH=$2 timeout 30 build/mtplx run --device cuda $P --depth 3 --samples $1 --parallel --max-seqs 64 \
        2>$OUT/emb-$1-$2-$3.err >$OUT/emb-$1-$2-$3.out; grep aggregate $OUT/emb-$1-$2-$3.err
}
for n in 1 8 16 64; do emb $n 1 a; emb $n 0 a
    cmp -s $OUT/emb-$n-1-a.out $OUT/emb-$n-0-a.out && echo "emb n=$n: same text both ways" || echo "emb n=$n: TEXT DIFFERS"
done 2>&1 | tee $OUT/emb.txt
S=/tmp/s27
for d in /tmp/s27 /tmp/mtplx-synth/27b-16l-bf16; do [ -f $d/config.json ] && ls $d/*.safetensors* >/dev/null 2>&1 && S=$d && break; done
if [ ! -f $S/config.json ]; then t0=$(date +%s); timeout 150 build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out $S --quiet; echo "synth $(( $(date +%s) - t0 )) s"; fi
for n in 1 8 64; do for sb in 1 0; do
    echo -n "27b-16l bf16 n=$n seq_batch=$sb: "
    MTPLX_CUDA_SEQ_BATCH=$sb timeout 60 build/mtplx run --device cuda --model $S $P --depth 0 --samples $n --parallel \
        --max-seqs 64 2>$OUT/s27-$n-$sb.err >$OUT/s27-$n-$sb.out; grep aggregate $OUT/s27-$n-$sb.err
done; cmp -s $OUT/s27-$n-1.out $OUT/s27-$n-0.out && echo "27b n=$n: same text both ways" || echo "27b n=$n: TEXT DIFFERS"
done 2>&1 | tee $OUT/s27.txt
for n in 1 8 16 64; do emb $n 1 b; emb $n 0 b; done 2>&1 | tee $OUT/emb2.txt
for sb in 1 0; do MTPLX_CUDA_PROFILE=1 MTPLX_CUDA_SEQ_BATCH=$sb timeout 30 build/mtplx run --device cuda $P --depth 3 --samples 64 \
    --parallel --max-seqs 64 > /dev/null 2>$OUT/prof-emb64-$sb.txt; done
echo done
