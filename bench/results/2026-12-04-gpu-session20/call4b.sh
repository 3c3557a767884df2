#!/usr/bin/env bash
# session 20 call 4b (qwen35-small-code, real weights), after the U<=2 instance at 10 blocks an SM:
# servers alternated SK_RG=2 (default) / 1: 1 stream D4, 8 streams policy and D3 pinned, 1,024-token rounds
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
mkdir -p /tmp/smx; cp .gpu-lead/smb/* /tmp/smx/
(cat /tmp/smx/part00 /tmp/smx/part01 | xz -dc -T8 | tar x -C /tmp) || { echo "unpack failed"; exit 1; }
M=/tmp/qwen35-small-code
start() { # $1 tag, env after
  local tag=$1; shift
  env "$@" MTPLX_SCHED_VERBOSE=1 build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s-$tag.out 2>$OUT/serve-$tag.err & PID=$!
  port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s-$tag.out); [ -n "$port" ] && break; sleep 0.1; done
  S="timeout 40 python3 bench/streams.py http://127.0.0.1:$port --max-tokens 1024"
  $S --streams 1,8 --rounds 1 > /dev/null 2>&1
}
stop() { kill -INT $PID; wait $PID; }
pass() {
  echo "+ pass $1 [$2]" | tee -a $L
  $S --streams 1 --depth 4 --rounds 2 2>&1 | grep -E "^\| 1 |mean" | sed 's/^/D4 /' | tee -a $L
  $S --streams 8 --rounds 2 2>&1 | grep -E "^\| 8 |mean" | sed 's/^/policy /' | tee -a $L
  $S --streams 8 --depth 3 --rounds 2 2>&1 | grep -E "^\| 8 |mean" | sed 's/^/D3 /' | tee -a $L
}
for a in 1 2 3; do
  start rg2$a; pass $a rg2; stop
  start rg1$a MTPLX_CUDA_SK_RG=1; pass $a rg1; stop
done
grep -h "drafts (at most 3)" $OUT/serve-*.err | sed 's/.*depth policy at start: //' | tee -a $L
echo "total $(el) s" | tee -a $L
