#!/usr/bin/env bash
# helper tcgemm, device call 2, short form (session 7; the device budget left no room for gpu-test.sh):
# test_backend_cuda under the default and the GEMM's stage / tile variants (same bits), gpu-test.sh's new
# gemm_bit_identical check, the variants on the matmul alone, and prefill 4k bf16 with the best.
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
LIM=${1:-110}
G=.gpu-tcgemm
git apply $G/branch.patch || { echo PATCH FAILED; exit 1; }
touch src/backend/cuda/*.cu src/engine/bench_kernels.c src/cli/cmd_bench_kernels.c tests/unit/test_backend_cuda.c
scripts/device-build.sh build model build/mtplx build/tests/test_backend_cuda CUDA=1 > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; echo BUILD FAILED; exit 1; }
M=build/mtplx TB=build/tests/test_backend_cuda; echo "built $(el) s"
S=/tmp/s; mkdir -p $S
[ -f $S/bf16/config.json ] || ( nice -n 5 $M synth --preset qwen35-27b-16l --dtype bf16 --out $S/bf16 --quiet; echo "bf16 synth done at $(el) s" ) > $OUT/synth-bf16.log 2>&1 &
export MTPLX_DEVICE=cuda
for cfg in "X=1" "MTPLX_CUDA_GEMM_KS=4 MTPLX_CUDA_GEMM_MT=2" "MTPLX_CUDA_GEMM_KS=4 MTPLX_CUDA_GEMM_ST=3 MTPLX_CUDA_GEMM_MT=1" \
           "MTPLX_CUDA_GEMM_KS=8" "MTPLX_CUDA_GEMM_KS=2 MTPLX_CUDA_GEMM_ST=4 MTPLX_CUDA_GEMM_MT=1" "MTPLX_CUDA_GEMM_KS=2 MTPLX_CUDA_GEMM_MT=2"; do
  ( env $cfg timeout 40 $TB > "$OUT/test-${cfg// /_}.txt" 2>&1; echo "rc $?" >> "$OUT/test-${cfg// /_}.txt" ) &
  PIDS="${PIDS:-} $!"
done
( source <(sed -n '/^gemm_equal()/,/^}/p' scripts/gpu-test.sh); gemm_equal; echo "gemm_equal rc $? at $(el) s" ) > $OUT/gemm-equal.txt 2>&1 &
PG=$!; wait $PIDS $PG; tail -6 $OUT/gemm-equal.txt
 for f in $OUT/test-*.txt; do echo "$(basename $f): $(grep -h 'passed\|^rc' $f | tr '\n' ' ')"; grep -h "FAIL\|differ\|limit" $f | head -3; done; echo "tests $(el) s"
MM() { local cfg=$1; shift; echo "== $cfg $*"; env $cfg timeout 12 $M bench --device cuda --matmul "$@" --reps 3 2>&1 | grep -E "T=(1|16|32|48|64|96|128) |rror"; }
{ MM "X=1" bf16 --shape 17408x5120 --count 2 --rows 128
  MM "MTPLX_CUDA_GEMM_KS=4" bf16 --shape 17408x5120 --count 2 --rows 128
  MM "MTPLX_CUDA_GEMM_KS=8" bf16 --shape 17408x5120 --count 2 --rows 128
  MM "X=1" q4 --shape 17408x5120 --count 8 --rows 128
  MM "MTPLX_CUDA_GEMM_KS=2" q4 --shape 17408x5120 --count 8 --rows 128
  MM "MTPLX_CUDA_GEMM_KS=4" q4 --shape 17408x5120 --count 8 --rows 128
} > $OUT/matmul.txt 2>&1; echo "matmul $(el) s"; cat $OUT/matmul.txt
best() { awk -v pat="$1" '/^==/{c=$0; sub(/^== /,"",c); sub(/ (bf16|q4) .*/,"",c); f=index($0," "pat" ")>0 && index($0,"17408x5120")>0} f&&/T=128 /{if(!b||$2+0<b){b=$2+0;bc=c}} END{print bc}' $OUT/matmul.txt; }
BB=$(best bf16); BQ=$(best q4); echo "best bf16: $BB  best q4: $BQ"
while [ ! -f $S/bf16/config.json ] && [ $(el) -lt $(( LIM - 14 )) ]; do sleep 1; done; cat $OUT/synth-bf16.log 2>/dev/null
L=$(( LIM - 2 - $(el) )); [ $L -gt 8 ] && [ -f $S/bf16/config.json ] && { echo "== prefill 4096 bf16 $BB"; env ${BB:-X=1} timeout $L $M bench --device cuda --prefill 4096 --reps 2 --model $S/bf16 2>&1 | grep -E "prefill|rror"; } | tee $OUT/prefill.txt
echo "all done $(el) s"
