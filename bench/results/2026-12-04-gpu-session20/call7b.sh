#!/usr/bin/env bash
# session 20 call 7b (qwen35-small-code, real weights, HEAD with the policy's probes and fading
# acceptance): fresh servers as in call 4b (warm-up round of 1 and 8 streams, then 8 streams under the
# policy, three rounds), with the step trace, to see what the policy drafts round by round
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
mkdir -p /tmp/smx; cp .gpu-lead/smb/* /tmp/smx/
(cat /tmp/smx/part00 /tmp/smx/part01 | xz -dc -T8 | tar x -C /tmp) || { echo "unpack failed"; exit 1; }
M=/tmp/qwen35-small-code
for k in 1 2 3; do
  MTPLX_SCHED_VERBOSE=1 MTPLX_SCHED_TRACE=/tmp/steps-$k.txt build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>$OUT/serve-$k.err & PID=$!
  port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
  S="timeout 40 python3 bench/streams.py http://127.0.0.1:$port --max-tokens 1024"
  echo "+ server $k" | tee -a $L
  $S --streams 1 --depth 4 --rounds 1 2>&1 | grep -E "^\| 1 " | sed 's/^/D4 warm /' | tee -a $L
  $S --streams 1,8 --rounds 1 2>&1 | grep -E "^\| [18] " | sed 's/^/policy warm /' | tee -a $L
  $S --streams 8 --rounds 3 2>&1 | grep -E "^\| 8 |mean" | sed 's/^/policy /' | tee -a $L
  kill -INT $PID; wait $PID
  grep "drafts (at most 3)" $OUT/serve-$k.err | sed 's/.*depth policy //' | tee -a $L
  cp /tmp/steps-$k.txt $OUT/
done
xz -9 $OUT/steps-*.txt
echo "total $(( $(date +%s)-t0 )) s" | tee -a $L
