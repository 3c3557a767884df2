#!/usr/bin/env bash
# session 16 call 7: the embedded model converted to q4 (g64): AR / D3 with the integer-pipe kernel off / on
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
build/mtplx convert --q-bits 4 --out /tmp/eq4 --quiet > /tmp/conv.txt 2>&1; cp models/qwen35-tiny-code/val_code.txt /tmp/eq4/
for dp in 0 1 0 1 0 1; do
  echo "== embedded q4 DP=$dp: $(MTPLX_CUDA_SK_DP=$dp timeout 60 build/mtplx bench --device cuda --model /tmp/eq4 --depths 0,3 --temperature 0.6 --prompts 8 --repeats 1 2>&1 | grep -iE 'bench pass|error|No such' | tr -s ' ' | tr '\n' '|' | cut -c1-200)" | tee -a $L
done
echo "done $(el) s" | tee -a $L
