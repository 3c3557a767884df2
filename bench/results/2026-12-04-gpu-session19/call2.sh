#!/usr/bin/env bash
# next session (after a two-call carry of the small model, as session 18's callA.sh / callB3.sh): where a
# cycle's ~0.42 ms besides the forwards goes at 8 streams, and whether the split gap policy (HEAD since
# session 18) now drafts 3 there. Also the embedded D3 cycle's per-op GPU split (MTPLX_CUDA_PROFILE=1).
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
mkdir -p /tmp/smx; cp .gpu-lead/smb/* /tmp/smx/
(cat /tmp/smx/part00 /tmp/smx/part01 | xz -dc -T4 | tar x -C /tmp) & up=$!
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
wait $up || { echo "unpack failed"; exit 1; }
M=/tmp/qwen35-small-code
MTPLX_SCHED_TRACE=/tmp/trace.txt MTPLX_SCHED_VERBOSE=1 build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
U=http://127.0.0.1:$port; S="python3 bench/streams.py $U --max-tokens 1024"
timeout 30 $S --streams 1,8 --rounds 1 > /dev/null 2>&1
for r in 1 2; do
  echo "+ policy 1 / 8" | tee -a $L; timeout 40 $S --streams 1,8 --rounds 2 2>&1 | tail -4 | tee -a $L
  echo "+ 1 stream D4 / 8 streams D3" | tee -a $L; timeout 20 $S --streams 1 --depth 4 --rounds 2 2>&1 | tail -2 | tee -a $L
  timeout 20 $S --streams 8 --depth 3 --rounds 2 2>&1 | tail -2 | tee -a $L
done
kill $pid; wait $pid; cp /tmp/trace.txt $OUT/trace.txt
# rows a sequence of the 8-sequence trunk steps, and mean gaps after trunk / MTP steps
awk '!/^#/ {k = ($5 > 0) ? "trunk" : "mtp"; if (prev != "") { g[prev] += $2; c[prev]++ } prev = k; if ($5 == 8) r[$6 / $5]++}
     END { for (x in g) printf "gap after %s steps: %.3f ms (%d)\n", x, g[x] / c[x], c[x]; for (x in r) printf "8-seq trunk steps of %s rows a sequence: %d\n", x, r[x] }' \
    $OUT/trace.txt | tee -a $L
MTPLX_CUDA_PROFILE=1 build/mtplx bench --device cuda --depths 3 --temperature 0.6 --prompts 4 2> $OUT/profile-d3.txt | tail -3 | tee -a $L
build/mtplx bench --device cuda --model $M --prompts 8 --max-tokens 128 --depths 0,3,4 --temperature 0.6 2>&1 | tail -5 | tee -a $L
echo "total $(el) s" | tee -a $L
