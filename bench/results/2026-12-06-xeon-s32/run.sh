#!/usr/bin/env bash
# session 32, Intel Xeon VM (2 vCPUs, AMX), idle: (1) the 35B-A3B-10l q4 MoE decode on the CPU (amx path);
# (2) the AVX2 path's q4 prefetch distances on bench-2b; (3) one thread, avx2 against amx. Output: run.txt.
M=/tmp/moe-cpu; B=/tmp/b2-q4
[ -d $M ] || build/mtplx synth --preset qwen35-35b-a3b-10l --dtype q4 --out $M --quiet
[ -d $B ] || build/mtplx synth --preset bench-2b --dtype q4 --out $B
for i in 1 2; do build/mtplx bench --membw --verify-cost --rows 4 --reps 5 --context 64 --model $M 2>&1 | tail -7; done
for r in 1 2; do for pf in "4096 16384" "0 0" "8192 32768" "2048 8192"; do set -- $pf
  echo "PF=$1/$2: $(MTPLX_KERNEL=avx2 MTPLX_QPACK_PF=$1 MTPLX_QPACK_PF2=$2 build/mtplx bench --membw --verify-cost --rows 1 --reps 7 --context 64 --model $B 2>&1 | grep 'AR decode')"
done; done
for k in avx2 amx; do echo "$k 1 thread: $(MTPLX_THREADS=1 MTPLX_KERNEL=$k build/mtplx bench --membw --verify-cost --rows 1 --reps 5 --context 64 --model $B 2>&1 | grep -E 'AR decode|memory read' | tr '\n' ' ')"; done
for k in avx2 amx; do MTPLX_THREADS=1 MTPLX_KERNEL=$k build/mtplx bench --matmul q4 --shape 1024x1024 --count 1 --rows 1 --reps 201 | grep "T=1 "; done
