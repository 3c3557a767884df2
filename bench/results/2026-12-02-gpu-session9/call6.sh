#!/usr/bin/env bash
# session 9 call 6 (lead): the attention test with static norm / RoPE arrays; the embedded model through serve
# (a 4,000-token prompt beside 4 streams, with the step trace; 1 / 8 streams)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
scripts/device-build.sh build model build/mtplx build/tests/test_backend_cuda CUDA=1 > /tmp/b.log 2>&1 || { tail -20 /tmp/b.log; exit 1; }
build/tests/test_backend_cuda 2>&1 | grep -v "^PASS\|^SKIP" | tail -8 | tee -a $L
MTPLX_SCHED_TRACE=/tmp/trace.txt build/mtplx serve --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
[ -n "$port" ] || { echo "serve did not start"; cat /tmp/s.err; kill $pid; exit 1; }
U=http://127.0.0.1:$port
echo "+ policy 1,8"; timeout 40 python3 bench/streams.py $U --streams 1,8 --max-tokens 256 --rounds 3 2>&1 | tail -7 | tee -a $L
echo "+ long prompt beside 4 streams"; n0=$(wc -l < /tmp/trace.txt)
timeout 60 python3 bench/streams.py $U --streams 4 --max-tokens 1024 --long-prompt 4000 --long-delay 0.05 --rounds 3 2>&1 | tail -3 | tee -a $L
sleep 0.5; tail -n +$((n0 + 1)) /tmp/trace.txt > $OUT/trace-long.txt
kill $pid; wait $pid
echo "total $(( $(date +%s) - t0 )) s" | tee -a $L
