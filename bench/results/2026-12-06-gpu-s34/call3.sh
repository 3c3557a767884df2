#!/usr/bin/env bash
# Session 34 call 3: call7.sh's 27B-16l part again (call 7's synth failed: /tmp/s did not exist). Uses call 7's two
# binaries when the warm machine still has them, else rebuilds them as call7.sh does.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
if [ ! -x /tmp/m-base ] || [ ! -x /tmp/m-pf ]; then
  echo "rebuilding" | tee -a $L
  touch src/backend/cuda/*
  scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
  cp build/mtplx /tmp/m-base
  git apply bench/results/2026-12-06-gpu-s33/sk-nextpf.patch || exit 1
  scripts/device-build.sh build CUDA=1 build/mtplx >> $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
  cp build/mtplx /tmp/m-pf
fi
mkdir -p /tmp/s
for d in q4 bf16; do /tmp/m-base synth --preset qwen35-27b-16l --dtype $d --out /tmp/s/$d --quiet 2>&1 | tail -1 | tee -a $L; done
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
echo "done $(el) s" | tee -a $L
