#!/usr/bin/env bash
# Prepared in session 25 (no device lent then); run in session 26 at a358190 on an H100: output in call1-out/.
# session 25 call 1: gpu-test on the landed tree (first GPU run since session 21), then issue 17's
# "threads beyond 2" on the host CPU (Intel Xeon, 16 cores) with today's tree: bench-2b q4 / q8 / bf16
# AR decode as a share of same-run bandwidth at 16 / 8 / 4 threads, and MTPLX_ATT_SPLIT at 16 threads;
# before those, the GPU's prefill chunk (MTPLX_CUDA_PREFILL_ROWS).
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
{ nproc; lscpu | grep -E "Model name|^CPU\(s\)|Thread|Socket|L3|NUMA node\(s\)|Flags" | cut -c1-400; free -g; } > $OUT/machine.txt 2>&1
timeout 330 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | cut -c1-2500 | tee -a $L; echo | tee -a $L
grep -B2 -A12 "^FAIL" $OUT/gpu-test.txt | head -60 | tee -a $L
# the GPU's prefill chunk (new knob MTPLX_CUDA_PREFILL_ROWS, default 128): 27B-16l q4 and the embedded model
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet 2>&1 | tail -1
for r in 128 512 1024 128 512; do
  echo "27B-16l q4 prefill 4096 rows $r: $(MTPLX_CUDA_PREFILL_ROWS=$r timeout 60 build/mtplx bench --device cuda --model /tmp/q27 --prefill 4096 2>&1 | grep -iE 'tok/s' | tail -1)" | tee -a $L
  echo "embedded prefill 4096 rows $r: $(MTPLX_CUDA_PREFILL_ROWS=$r timeout 60 build/mtplx bench --device cuda --prefill 4096 2>&1 | grep -iE 'tok/s' | tail -1)" | tee -a $L
done
echo "gpu prefill done $(el) s" | tee -a $L
export MTPLX_PACK_CACHE=/tmp/qpack-cache
for f in q4 q8 bf16; do
  [ $(el) -gt 500 ] && break
  build/mtplx synth --preset bench-2b --dtype $f --out /tmp/b2b-$f --quiet 2>&1 | tail -1
  for t in 16 8 4; do
    [ $(el) -gt 530 ] && break
    MTPLX_THREADS=$t timeout 60 build/mtplx bench --device cpu --membw --membw-mb 1024 --verify-cost --rows 4 --reps 5 \
      --context 64 --model /tmp/b2b-$f --json > $OUT/$f-t$t.json 2> $OUT/$f-t$t.err
    python3 -c "
import json,sys; j=json.load(open('$OUT/$f-t$t.json'))
print('$f t=$t kernel', j.get('kernel'), 'fwd', j.get('forward_ms'), 'AR GB/s %.1f membw %.1f frac %.3f' % (j.get('ar_decode_gbs',0), j.get('membw_interleaved_gbs',0), j.get('ar_decode_fraction_of_membw',0)))" 2>&1 | tee -a $L
  done
done
echo "bench-2b done $(el) s" | tee -a $L
build/mtplx synth --config bench/configs/qwen35-small-code.json --out /tmp/small --quiet 2>&1 | tail -1
for r in 1 2 3; do for s in 0 2048; do
  [ $(el) -gt 570 ] && break
  echo "small 16 thr ATT_SPLIT=$s ctx 16384: $(MTPLX_THREADS=16 MTPLX_ATT_SPLIT=$s timeout 40 build/mtplx bench --device cpu --model /tmp/small --verify-cost --rows 2 --reps 5 --context 16384 2>&1 | grep -E '(1|2)-row forward' | tr -s ' ' | tr '\n' '|')" | tee -a $L
done; done
echo "total $(el) s" | tee -a $L
