#!/usr/bin/env bash
# session 27 call 7b (qwen35-small-code, real weights): issue 12's ratio in steady state (bench/streams.py
# --closed-loop, 8 s windows, 1,024-token requests) after this session's serve changes (q4 draft copy,
# history chunks riding along, fresh sequences not waited for): 1 stream D4 (the best single) against
# 8 streams D3 pinned and under the policy, two passes; as session 21's call 9b.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
cp .gpu-lead/part01 /tmp/smx/
(cat /tmp/smx/part00 /tmp/smx/part01 | xz -dc -T8 | tar x -C /tmp) || { echo "unpack failed"; exit 1; }
M=/tmp/qwen35-small-code
build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>$OUT/serve.err & PID=$!
port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
head -1 /tmp/s.out | tee -a $L
S="timeout 60 python3 bench/streams.py http://127.0.0.1:$port --max-tokens 1024"
$S --streams 1,8 --rounds 1 > /dev/null 2>&1
echo "unpacked + warm $(el) s" | tee -a $L
for a in 1 2; do
  echo "+ pass $a" | tee -a $L
  $S --streams 1 --depth 4 --closed-loop 8 2>&1 | grep -E "^\| 1 " | sed 's/^/closed D4 /' | tee -a $L
  $S --streams 8 --depth 3 --closed-loop 8 2>&1 | grep -E "^\| 8 " | sed 's/^/closed D3 /' | tee -a $L
  $S --streams 8 --closed-loop 8 2>&1 | grep -E "^\| 8 " | sed 's/^/closed policy /' | tee -a $L
done
kill -INT $PID; wait $PID
echo "total $(el) s" | tee -a $L
