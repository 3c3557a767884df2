#!/usr/bin/env bash
# session 11 call 4 (lead): test_backend_cuda after the GEMM check's limit; 27B-16l bf16 / q4 AR and D3
# through `run` (T 0.6 top-k 20); 27B bf16 1 / 8 / 64 streams through the scheduler, 512 tokens each
# (whole lines; MTPLX_CUDA_STEPS for 1 stream); the embedded model's bench
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
scripts/device-build.sh build model build/mtplx build/tests/test_backend_cuda CUDA=1 > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "build $(( $(date +%s)-t0 )) s" | tee -a $L
MTPLX_DEVICE=cuda timeout 60 build/tests/test_backend_cuda > $OUT/tbc.txt 2>&1; echo "test_backend_cuda rc=$?" | tee -a $L
grep -iE "fail|passed" $OUT/tbc.txt | tail -5 | tee -a $L
timeout 100 build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/b27 --quiet
timeout 100 build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet
S="--temperature 0.6 --top-k 20 --top-p 0.95"
for m in b27 q27; do for d in 0 3 0 3; do echo "== $m D$d: $(timeout 60 build/mtplx run --device cuda --model /tmp/$m --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 300 --depth $d $S 2>&1 | tail -1 | cut -c1-150)"; done; done | tee -a $L
P="--prompt-tokens 11,22,33,44,55,66,77,88 --max-tokens 512 $S --seed 1"
for n in 1 8 64; do echo "== 27B AR samples $n: $(timeout 100 build/mtplx run --device cuda --model /tmp/b27 $P --depth 0 --samples $n --parallel --max-seqs 64 --quiet 2>&1 >/dev/null | tail -1)"; done | tee -a $L
MTPLX_CUDA_STEPS=1 timeout 100 build/mtplx run --device cuda --model /tmp/b27 $P --depth 0 --samples 1 --parallel --quiet > /dev/null 2> $OUT/steps-par1.txt
MTPLX_CUDA_STEPS=1 timeout 100 build/mtplx run --device cuda --model /tmp/b27 --prompt-tokens 11,22,33,44,55,66,77,88 --max-tokens 512 $S --depth 0 > /dev/null 2> $OUT/steps-run1.txt
tail -12 $OUT/steps-par1.txt $OUT/steps-run1.txt | tee -a $L
for r in 1 2; do echo "== emb $(timeout 60 build/mtplx bench --device cuda --depths 0,3 2>&1 | grep -E '^(AR|D3)' | awk '{printf "%s %s ", $1, $2}')"; done | tee -a $L
echo "total $(( $(date +%s)-t0 )) s" | tee -a $L
