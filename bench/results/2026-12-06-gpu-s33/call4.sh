#!/usr/bin/env bash
# Session 33, call 4: the full-size shapes for the first time on the GPU — Qwen3.5/3.6 27B dense (64 layers) and
# 35B-A3B (40 layers), both q4 g64 (random weights from `synth`, so MTP accepts nothing: D3's tok/s is cycles
# a second, its cost in AR steps the figure). Per model: bench --membw --verify-cost (1..8 rows, context 512),
# AR and D3 through `run` (T 0.6 top-k 20, 256 tokens), 4k prefill.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "built $(el) s; $(df -h /tmp | tail -1)" | tee -a $L
PT=$(seq -s, 11 37 1200)
for spec in "qwen35-27b q27" "qwen35-35b-a3b q35"; do
  set -- $spec; M=/tmp/$2; rm -rf /tmp/q27 /tmp/q35
  [ $(el) -lt 420 ] || break
  build/mtplx synth --preset $1 --dtype q4 --out $M --quiet 2>&1 | tail -1 | tee -a $L
  echo "$1 synth done $(el) s" | tee -a $L
  echo "$1 bench: $(timeout 150 build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 3 --context 512 --model $M 2>&1 | grep -E 'row forward|tok/s|weights' | tr -s ' ' | tr '\n' ' ')" | tee -a $L
  for d in 0 3; do
    [ $(el) -lt 500 ] || break
    echo "$1 run depth $d: $(timeout 90 build/mtplx run --device cuda --model $M --prompt-tokens $PT --max-tokens 256 --temperature 0.6 --top-k 20 --top-p 0.95 --seed 1 --depth $d 2>&1 >/dev/null | grep -iE 'tok/s|accept' | tr -s ' ' | tr '\n' ' ')" | tee -a $L
  done
  [ $(el) -lt 520 ] && echo "$1 prefill 4096: $(timeout 60 build/mtplx bench --device cuda --prefill 4096 --model $M 2>&1 | tail -1)" | tee -a $L
done
echo "done $(el) s" | tee -a $L
