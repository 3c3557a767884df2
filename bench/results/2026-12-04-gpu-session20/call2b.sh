#!/usr/bin/env bash
# session 20 call 2b (qwen35-small-code, real weights): (1) bench --device cuda depths 0,3,4 at T 0.6
# (issue 21's MTP vs llama.cpp AR); (2) one server with the delivery and step traces: one stream under
# the policy and D4 pinned (the policy's bursts, session 19), then three alternations of 1 stream D4 /
# 8 streams policy / 8 streams D3 (issue 12's 4x, SK_RG=2 default); (3) a server with MTPLX_CUDA_SK_RG=1:
# 8 streams policy / D3, alternated with (2)'s
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
mkdir -p /tmp/smx; cp .gpu-lead/smb/* /tmp/smx/
(cat /tmp/smx/part00 /tmp/smx/part01 | xz -dc -T8 | tar x -C /tmp) || { echo "unpack failed"; exit 1; }
M=/tmp/qwen35-small-code
echo "unpacked $(el) s" | tee -a $L
build/mtplx bench --device cuda --model $M --depths 0,3,4 --temperature 0.6 --prompts 8 --max-tokens 256 2>&1 | grep -E "^(D[0-9]|AR)|tok/s" | head -8 | tee -a $L
echo "bench $(el) s" | tee -a $L
start() { # $1 tag, env after
  local tag=$1; shift
  env "$@" MTPLX_SCHED_VERBOSE=1 MTPLX_SSE_TRACE=/tmp/sse-$tag.txt MTPLX_SCHED_TRACE=/tmp/steps-$tag.txt build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s-$tag.out 2>$OUT/serve-$tag.err & PID=$!
  port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s-$tag.out); [ -n "$port" ] && break; sleep 0.1; done
  S="timeout 40 python3 bench/streams.py http://127.0.0.1:$port --max-tokens 1024"
}
stop() { kill -INT $PID; wait $PID; }
start rg2
$S --streams 1,8 --rounds 1 > /dev/null 2>&1
echo "+ traced: t_ms marks" | tee -a $L
echo "policy1 start $(python3 -c 'import time; print(time.clock_gettime(time.CLOCK_MONOTONIC)*1e3)')" | tee -a $L
$S --streams 1 --rounds 2 2>&1 | grep -E "^\| 1 |mean" | sed 's/^/policy /' | tee -a $L
echo "d4 start $(python3 -c 'import time; print(time.clock_gettime(time.CLOCK_MONOTONIC)*1e3)')" | tee -a $L
$S --streams 1 --depth 4 --rounds 2 2>&1 | grep -E "^\| 1 |mean" | sed 's/^/D4 /' | tee -a $L
echo "end $(python3 -c 'import time; print(time.clock_gettime(time.CLOCK_MONOTONIC)*1e3)')" | tee -a $L
pass() {
  echo "+ pass $1 [$2]" | tee -a $L
  [ "$2" = rg2 ] && $S --streams 1 --depth 4 --rounds 2 2>&1 | grep -E "^\| 1 |mean" | sed 's/^/D4 /' | tee -a $L
  $S --streams 8 --rounds 2 2>&1 | grep -E "^\| 8 |mean" | sed 's/^/policy /' | tee -a $L
  $S --streams 8 --depth 3 --rounds 2 2>&1 | grep -E "^\| 8 |mean" | sed 's/^/D3 /' | tee -a $L
}
pass 1 rg2; stop
start rg1 MTPLX_CUDA_SK_RG=1; $S --streams 8 --rounds 1 > /dev/null 2>&1; pass 1 rg1; stop
start rg2b; $S --streams 1,8 --rounds 1 > /dev/null 2>&1; pass 2 rg2; stop
start rg1b MTPLX_CUDA_SK_RG=1; $S --streams 8 --rounds 1 > /dev/null 2>&1; pass 2 rg1; stop
start rg2c; $S --streams 1,8 --rounds 1 > /dev/null 2>&1; pass 3 rg2; stop
grep -h "depth policy at start" $OUT/serve-rg2.err $OUT/serve-rg1.err | sed 's/gap after.*//' | tee -a $L
cp /tmp/sse-rg2.txt /tmp/steps-rg2.txt $OUT/ 2>/dev/null; xz -9 $OUT/sse-rg2.txt $OUT/steps-rg2.txt
echo "total $(el) s" | tee -a $L
