#!/usr/bin/env bash
# session 18 call B3: the small model (real weights; first half left in /tmp/smx by call A3) through serve
# with 1,024-token completions (rounds of ~0.3-1 s instead of 0.1-0.3 s): issue 12's 8-stream bar, final HEAD
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
mkdir -p /tmp/smx; cp .gpu-lead/smb/* /tmp/smx/
(cat /tmp/smx/part00 /tmp/smx/part01 | xz -dc -T4 | tar x -C /tmp) & up=$!
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
wait $up || { echo "unpack failed"; exit 1; }
M=/tmp/qwen35-small-code
echo "build + unpack $(el) s" | tee -a $L
MTPLX_SCHED_VERBOSE=1 build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
[ -n "$port" ] || { echo "serve did not start"; cat /tmp/s.err; kill $pid; exit 1; }
U=http://127.0.0.1:$port
S="python3 bench/streams.py $U --max-tokens 1024"
echo "+ warm-up 1,8" | tee -a $L; timeout 30 $S --streams 1,8 --rounds 1 2>&1 | tail -2 | tee -a $L
for r in 1 2; do
  echo "+ policy 1 / 8 (round set $r)" | tee -a $L; timeout 40 $S --streams 1,8 --rounds 2 2>&1 | tail -4 | tee -a $L
  echo "+ 1 stream D3 / D4" | tee -a $L; for d in 3 4; do timeout 20 $S --streams 1 --depth $d --rounds 2 2>&1 | tail -2 | tee -a $L; done
  echo "+ 8 streams D1 / D3" | tee -a $L; for d in 1 3; do timeout 20 $S --streams 8 --depth $d --rounds 2 2>&1 | tail -2 | tee -a $L; done
done
kill $pid; wait $pid; grep -i "depth policy" /tmp/s.err | tail -2 | tee -a $L
echo "total $(el) s" | tee -a $L
