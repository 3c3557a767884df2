#!/usr/bin/env bash
# session 13 call 6 (lead): the cold long-prompt gap again, now with the server's delivery trace
# ($MTPLX_SSE_TRACE: worker hand-offs 'f' and socket writes 'w' per stream) beside the step trace, read
# by bench/delivery_gaps.py: which side of the server the 11-58 ms gaps of calls 4-5 fall on
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build model build/mtplx CUDA=1 > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
mkdir -p /tmp/tr
MTPLX_SSE_TRACE=/tmp/tr/sse.txt MTPLX_SCHED_TRACE=/tmp/tr/sched.txt build/mtplx serve --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
[ -n "$port" ] || { echo "serve did not start"; cat /tmp/s.err; kill $pid; exit 1; }
U=http://127.0.0.1:$port
timeout 40 python3 bench/streams.py $U --streams 1,8 --max-tokens 256 --rounds 1 2>&1 | tail -2 | tee -a $L
cp /tmp/tr/sse.txt /tmp/tr/sse-warmup.txt
echo "+ long prompt beside 4 streams (rounds: cold, cached, cached)" | tee -a $L
for r in 1 2 3; do
  n0=$(wc -l < /tmp/tr/sse.txt)
  timeout 30 python3 bench/streams.py $U --streams 4 --max-tokens 1024 --long-prompt 4000 --long-delay 0.05 --rounds 1 2>&1 | tail -1 | tee -a $L
  tail -n +$((n0 + 1)) /tmp/tr/sse.txt > /tmp/tr/sse-round$r.txt
  python3 bench/delivery_gaps.py /tmp/tr/sse-round$r.txt /tmp/tr/sched.txt --top 6 | tee -a $L
done
kill $pid; wait $pid
tar -C /tmp/tr -cJf $OUT/traces.tar.xz .
echo "total $(el) s" | tee -a $L
