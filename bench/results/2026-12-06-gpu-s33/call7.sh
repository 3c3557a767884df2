#!/usr/bin/env bash
# NOT RUN (session 33's device time ran out). Prefetching the next matmul while the small ops run (bench/cuda.md
# "What limits it now", session 33): with MTPLX_CUDA_SK_NEXTPF=N every warp of a 1-row q launch (k_sk_qdp) and
# of a bf16 launch, once done, asks L2 (cp.async.bulk.prefetch.L2) for the first N spans of each warp range of
# the matmul that followed this one in the previous forward (learned on the host; cleared when weights are
# freed). Only the cache is touched, so no bit can change. ptxas: the default 1-row q4 g64 instance gained 4 bytes
# of spill (q4 g32: 40), so the call measures HEAD's binary beside the patched one with the knob off and on.
#   (the script applies bench/results/2026-12-06-gpu-s33/sk-nextpf.patch itself, after building HEAD)
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
touch src/backend/cuda/* # a warm machine may hold objects built from patched sources newer than these
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
cp build/mtplx /tmp/m-base
{ git apply bench/results/2026-12-06-gpu-s33/sk-nextpf.patch || patch -p1 < bench/results/2026-12-06-gpu-s33/sk-nextpf.patch; } || { echo "patch failed" | tee -a $L; exit 1; }
scripts/device-build.sh build CUDA=1 build/mtplx build/tests/test_backend_cuda >> $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
cp build/mtplx /tmp/m-pf
echo "built $(el) s" | tee -a $L
MTPLX_CUDA_SK_NEXTPF=8 timeout 60 build/tests/test_backend_cuda > $OUT/tbc.txt 2>&1; echo "test_backend_cuda NEXTPF=8 rc=$? $(tail -1 $OUT/tbc.txt)" | tee -a $L
for d in q4 bf16; do build/mtplx synth --preset qwen35-27b-16l --dtype $d --out /tmp/s/$d --quiet 2>&1 | tail -1 | tee -a $L; done
T=$(seq -s, 11 37 700)
for d in q4 bf16; do
  /tmp/m-base logits --model /tmp/s/$d --tokens $T --step --out /tmp/l0.st > /dev/null 2>&1
  MTPLX_CUDA_SK_NEXTPF=8 /tmp/m-pf logits --model /tmp/s/$d --tokens $T --step --out /tmp/l1.st > /dev/null 2>&1
  cmp -s /tmp/l0.st /tmp/l1.st && echo "$d --step logits: base == NEXTPF=8" | tee -a $L || echo "$d: DIFFER" | tee -a $L
done
ar() { timeout 90 env "${@:2}" $1 bench --device cuda --membw --verify-cost --rows 1 --reps 9 --context 512 --model /tmp/s/$D 2>&1 | grep -E 'AR decode' | tr -s ' '; }
for D in q4 bf16; do
  for r in 1 2; do
    echo "$D base: $(ar /tmp/m-base X=0)" | tee -a $L
    for n in 0 4 8 16 32; do echo "$D NEXTPF=$n: $(ar /tmp/m-pf MTPLX_CUDA_SK_NEXTPF=$n)" | tee -a $L; done
  done
done
# embedded model (small matmuls: the ramp is most of each launch), AR and D3
for r in 1 2; do for n in 0 8; do
  echo "embedded NEXTPF=$n: $(MTPLX_CUDA_SK_NEXTPF=$n timeout 60 /tmp/m-pf bench --device cuda --depths 0,3 2>&1 | grep -iE 'tok/s' | tr -s ' ' | tr '\n' ' ')" | tee -a $L
done; done
[ $(el) -lt 480 ] && { MTPLX_CUDA_SK_NEXTPF=8 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/m-pf run --prompt hi \
  --max-tokens 8 --depth 3 > $OUT/memcheck.txt 2>&1; echo "memcheck NEXTPF=8 rc=$?" | tee -a $L; }
echo "done $(el) s" | tee -a $L
