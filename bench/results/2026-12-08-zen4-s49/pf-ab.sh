#!/usr/bin/env bash
# session 49: bench-2b q4 AR decode on the Zen 4 with the q4 kernel's software prefetch off for 1-row calls
# (AMD's default), L2 only, and L1 + L2 (Intel's default), alternated; the fraction is of the same run's read
OUT=${1:?out}; cd /work/main
for r in 1 2 3 4; do for s in "" "MTPLX_QPACK_PF=0 MTPLX_QPACK_PF2=16384" "MTPLX_QPACK_PF=4096 MTPLX_QPACK_PF2=16384"; do
  echo "== round $r [${s:-default}] $(date +%T) $(env $s build/mtplx bench --membw --verify-cost --rows 2 --reps 5 \
      --context 256 --model /tmp/bench-2b-${FMT:-q4} 2>&1 | grep -E "AR decode" | sed 's/ (median.*//')"
done; done > $OUT/pf-ab-${FMT:-q4}.txt 2>&1
