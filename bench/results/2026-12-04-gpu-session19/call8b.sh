#!/usr/bin/env bash
# session 19 call 8b: issue 12's 4x bar on qwen35-small-code with the batched MTP head (HEAD): one
# server, 1,024-token rounds, four alternations of 1 stream D4 (the best single-stream setting) /
# 8 streams D3 pinned / 1 and 8 streams under the policy, two rounds each
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
mkdir -p /tmp/smx; cp .gpu-lead/smb/* /tmp/smx/
(cat /tmp/smx/part00 /tmp/smx/part01 | xz -dc -T4 | tar x -C /tmp) || { echo "unpack failed"; exit 1; }
M=/tmp/qwen35-small-code
MTPLX_SCHED_VERBOSE=1 build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>$OUT/serve.err & pid=$!
port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
S="timeout 40 python3 bench/streams.py http://127.0.0.1:$port --max-tokens 1024"
$S --streams 1,8 --rounds 1 > /dev/null 2>&1
for a in 1 2 3 4; do
  echo "+ pass $a" | tee -a $L
  $S --streams 1 --depth 4 --rounds 2 2>&1 | grep -E "^\| 1 |mean" | sed 's/^/D4 /' | tee -a $L
  $S --streams 8 --depth 3 --rounds 2 2>&1 | grep -E "^\| 8 |mean" | sed 's/^/D3 /' | tee -a $L
  $S --streams 1,8 --rounds 2 2>&1 | grep -E "^\| [18] |mean" | sed 's/^/policy /' | tee -a $L
done
kill -INT $pid; wait $pid
echo "total $(( $(date +%s)-t0 )) s" | tee -a $L
