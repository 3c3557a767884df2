#!/usr/bin/env bash
# session 29 call 1: session 28's bf16 read-rate probe (bench/results/2026-12-05-gpu-s28/call1.sh), then
# issue 17's "threads beyond 2" on the host CPU: bench-2b q4 / q8 AR decode at 16 and 8 threads against
# the read measured in the same run (as session 25's call 1).
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
bash bench/results/2026-12-05-gpu-s28/call1.sh
lscpu | grep -E 'Model name|^CPU\(s\)' | tee -a $L
for d in q4 q8; do
  [ $(el) -lt 420 ] || break
  build/mtplx synth --preset bench-2b --dtype $d --out /tmp/b2-$d --quiet > /dev/null 2>&1 || { echo "synth $d failed"; continue; }
  for t in 16 8 16; do
    echo "== bench-2b $d, $t threads ($(el) s)" | tee -a $L
    MTPLX_THREADS=$t build/mtplx bench --device cpu --membw --membw-mb 1024 --verify-cost --rows 2 --reps 5 --context 64 --model /tmp/b2-$d 2>&1 | grep -E 'kernel|bandwidth|forward|AR decode|sequence state' | tee -a $OUT/cpu-$d-$t.txt | tee -a $L
  done
done
echo "all done $(el) s" | tee -a $L
