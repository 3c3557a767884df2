#!/usr/bin/env bash
# (call 1 ran an earlier form of this tree: MTPLX_CUDA_SK_GA=1 meant group pieces for every launch, and its
# masked-quarter loads were a branch instead of a select — 25% slower than HEAD, fixed before call 2)
# session 14 call 1: build; the stream-K q matmul alone with the group-piece span layout (MTPLX_CUDA_SK_GA=1,
# new default) against the masked-quarter layout (=0), alternated, q4 / q8 x groups 32 / 64 / 128, 27B
# shape 17408x5120, rows 1..16; then scripts/gpu-test.sh (which now also checks the two layouts' bits)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee -a $L
for k in 1 2; do
  for f in q4:64:16 q8:64:8 q4:32:16 q8:32:8 q4:128:16 q8:128:8; do
    IFS=: read fmt gs cnt <<< "$f"
    for ga in 1 0; do
      o=$OUT/mm-$fmt-g$gs-ga$ga-k$k.txt
      MTPLX_CUDA_SK_GA=$ga timeout 40 build/mtplx bench --device cuda --matmul $fmt --group-size $gs --shape 17408x5120 --count $cnt --rows 16 --reps 5 > $o 2>&1
      echo "== $fmt g$gs ga$ga: $(grep -E 'T=(1|2|4|8|9|16) ' $o | awk '{printf "T%s %s GB/s | ", substr($1,3), $4}')" | tee -a $L
    done
  done
  MTPLX_CUDA_SK_U=4 timeout 40 build/mtplx bench --device cuda --matmul q4 --group-size 32 --shape 17408x5120 --count 16 --rows 16 --reps 5 > $OUT/mm-u4.txt 2>&1
  echo "== q4 g32 ga1 U4: $(grep -E 'T=(1|2|4|8|9|16) ' $OUT/mm-u4.txt | awk '{printf "T%s %s GB/s | ", substr($1,3), $4}')" | tee -a $L
done
echo "matmul $(el) s" | tee -a $L
timeout 330 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed|differ|group pieces" $OUT/gpu-test.txt | tee -a $L
cd $OUT && tar cJf mm.tar.xz mm-*.txt && rm -f mm-*.txt
