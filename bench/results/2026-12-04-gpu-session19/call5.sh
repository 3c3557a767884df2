#!/usr/bin/env bash
# session 19 call 5 (after call A's carry of the small model's first half): serve A/B of the batched
# MTP step with its head behind the layer on qwen35-small-code (MTPLX_SCHED_MTP_HEAD=0 / 1)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
mkdir -p /tmp/smx; cp .gpu-lead/smb/* /tmp/smx/
(cat /tmp/smx/part00 /tmp/smx/part01 | xz -dc -T4 | tar x -C /tmp) || { echo "unpack failed"; exit 1; }
[ -x build/mtplx ] || { echo "no build"; exit 1; }
ab() { # $1 model dir, $2 MTP_HEAD, $3 tag
  MTPLX_SCHED_MTP_HEAD=$2 MTPLX_SCHED_TRACE=/tmp/trace-$3.txt build/mtplx serve --model $1 --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
  port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
  U=http://127.0.0.1:$port; S="timeout 40 python3 bench/streams.py $U --max-tokens 1024"
  echo "+ $3 MTP_HEAD=$2: 1 stream D4 / 8 streams D3 / policy 1,8" | tee -a $L
  $S --streams 1 --depth 4 --rounds 2 --warmup 1 2>&1 | tail -1 | tee -a $L
  $S --streams 8 --depth 3 --rounds 2 2>&1 | tail -1 | tee -a $L
  $S --streams 1,8 --rounds 2 2>&1 | tail -2 | tee -a $L
  kill -INT $pid; wait $pid; cp /tmp/trace-$3.txt $OUT/
}
M=/tmp/qwen35-small-code
ab $M 0 s0; ab $M 1 s1; ab $M 0 s0b; ab $M 1 s1b; ab $M 1 s1c; ab $M 0 s0c
echo "total $(el) s" | tee -a $L
