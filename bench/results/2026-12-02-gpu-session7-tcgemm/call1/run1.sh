#!/usr/bin/env bash
# helper tcgemm, device call 1 (session 7): build the branch, test_backend_cuda (the GEMM vs the stream-K
# kernel bit for bit), the matmul alone GEMM vs MTPLX_CUDA_GEMM=0, then on the 27B-16l shape: prefill 4k
# (bf16, q4) and 64 streams (bf16), GEMM on vs off.
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
G=.gpu-tcgemm
git apply $G/branch.patch || { echo PATCH FAILED; exit 1; }
touch src/backend/cuda/*.cu src/engine/bench_kernels.c src/cli/cmd_bench_kernels.c tests/unit/test_backend_cuda.c
scripts/device-build.sh build build/mtplx CUDA=1 > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; echo BUILD FAILED; exit 1; }
M=build/mtplx TB=build/tests/test_backend_cuda
echo "mtplx built $(el) s"
S=/tmp/s; mkdir -p $S
( nice -n 5 $M synth --preset qwen35-27b-16l --dtype q4 --out $S/q4 --quiet; echo "q4 synth done at $(el) s" ) > $OUT/synth-q4.log 2>&1 &
( nice -n 5 $M synth --preset qwen35-27b-16l --dtype bf16 --out $S/bf16 --quiet; echo "bf16 synth done at $(el) s" ) > $OUT/synth-bf16.log 2>&1 &
scripts/device-build.sh build $TB CUDA=1 >> $OUT/build.log 2>&1; echo "test build rc $? at $(el) s"
export MTPLX_DEVICE=cuda
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
timeout 70 $TB > $OUT/test.txt 2>&1; echo "test rc $? at $(el) s"; grep -h "FAIL\|passed\|differ" $OUT/test.txt | head -20
MM() { local cfg=$1; shift; echo "== $cfg $*"; env $cfg timeout 30 $M bench --device cuda --matmul "$@" --reps 5 2>&1 | grep -E "T=|rror"; }
{ MM "X=1" bf16 --shape 17408x5120 --count 4 --rows 128
  MM "MTPLX_CUDA_GEMM=0" bf16 --shape 17408x5120 --count 4 --rows 128
  MM "X=1" q4 --shape 17408x5120 --count 16 --rows 128
  MM "MTPLX_CUDA_GEMM=0" q4 --shape 17408x5120 --count 16 --rows 128
  MM "X=1" bf16 --shape 5120x17408 --count 4 --rows 128
  MM "X=1" q4 --shape 5120x17408 --count 16 --rows 128
} > $OUT/matmul.txt 2>&1; echo "matmul $(el) s"; grep -E "==|T=(1|8|16|17|31|32|33|48|64|96|128) " $OUT/matmul.txt
PF() { local f=$1 c=$2 n=$3; echo "== prefill $n $f $c"; env $c timeout 45 $M bench --device cuda --prefill $n --reps 2 --model $S/$f 2>&1 | grep -E "prefill|rror"; }
for f in bf16 q4; do
  while ! grep -q "done" $OUT/synth-$f.log && [ $(el) -lt 120 ]; do sleep 1; done; cat $OUT/synth-$f.log
  [ -f $S/$f/config.json ] || continue
  { PF $f X=1 4096; PF $f MTPLX_CUDA_GEMM=0 4096; } 2>&1 | tee $OUT/prefill-$f.txt; echo "prefill $f $(el) s"
done
ST() { local c=$1; echo "== 64 streams bf16 $c"; env $c timeout 30 $M run --device cuda --model $S/bf16 --prompt-tokens 1,2,3 --samples 64 --parallel --max-seqs 64 --depth 0 --max-tokens 64 2>&1 | grep -iE "tok/s|rror" | tail -3; }
[ $(el) -lt 150 ] && { ST X=1; ST MTPLX_CUDA_GEMM=0; } 2>&1 | tee $OUT/streams.txt; echo "streams $(el) s"
[ $(el) -lt 170 ] && { PF bf16 X=1 32768; } 2>&1 | tee $OUT/prefill32k.txt
echo "all done $(el) s"
