#!/usr/bin/env bash
# (the knobs MTPLX_CUDA_SK_RING / MTPLX_CUDA_SK_DB these calls compared existed only in the tree of that call:
# the kernels behind them were slower or level and were not committed; bench/cuda.md "Session 13")
# session 13 call 2 (lead): why the cp.async ring kernels read slower than the batched ones (call 1:
# bf16 2.29 vs 3.24 TB/s, q8 1.73 vs 2.96): ncu full sections of both on the 27B FFN shape, 1 row, and
# the matmul alone with the blocks per multiprocessor forced (MTPLX_CUDA_SK_BPS) for both
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build build/mtplx CUDA=1 > /tmp/build.txt 2>&1 || { tail -20 /tmp/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
mkdir -p /tmp/o
for r in 8 0; do for b in 2 3 4 6 8; do
  echo "== ring $r bps $b bf16: $(MTPLX_CUDA_SK_BPS=$b MTPLX_CUDA_SK_RING=$r timeout 30 build/mtplx bench --device cuda --matmul bf16 --shape 17408x5120 --count 4 --rows 2 --reps 5 2>&1 | grep -E 'T=' | tr -s ' ' | tr '\n' '|')"
  echo "== ring $r bps $b q8: $(MTPLX_CUDA_SK_BPS=$b MTPLX_CUDA_SK_RING=$r timeout 30 build/mtplx bench --device cuda --matmul q8 --shape 17408x5120 --count 8 --rows 2 --reps 5 2>&1 | grep -E 'T=' | tr -s ' ' | tr '\n' '|')"
done; done | tee -a $L
echo "bps $(el) s" | tee -a $L
FULL="ncu --clock-control none --set full --launch-skip 6 --launch-count 1"
MTPLX_CUDA_SK_RING=8 timeout 60 $FULL -k regex:k_sk_bf16r build/mtplx bench --device cuda --matmul bf16 --shape 17408x5120 --count 4 --rows 1 --reps 2 > /tmp/o/ncu-bf16-ring8.txt 2>&1
MTPLX_CUDA_SK_RING=0 timeout 60 $FULL -k regex:k_sk_bf16 build/mtplx bench --device cuda --matmul bf16 --shape 17408x5120 --count 4 --rows 1 --reps 2 > /tmp/o/ncu-bf16-ring0.txt 2>&1
MTPLX_CUDA_SK_RING=8 timeout 60 $FULL -k regex:k_sk_qr build/mtplx bench --device cuda --matmul q8 --shape 17408x5120 --count 8 --rows 1 --reps 2 > /tmp/o/ncu-q8-ring8.txt 2>&1
MTPLX_CUDA_SK_RING=0 timeout 60 $FULL -k regex:k_sk_q build/mtplx bench --device cuda --matmul q8 --shape 17408x5120 --count 8 --rows 1 --reps 2 > /tmp/o/ncu-q8-ring0.txt 2>&1
tar -C /tmp/o -cJf $OUT/ncu.tar.xz .
echo "total $(el) s" | tee -a $L
