#!/usr/bin/env bash
# session 13 call 5 (lead): call 4's cold long-prompt round stalled the 4 decoding streams for 57.7 ms
# (32x the median gap; session 9: 5.4 ms = 1.82x). The same rounds with the scheduler's step trace, then
# again in a fresh server with CUDA_MODULE_LOADING=EAGER (is it the first launch of kernels that only a
# long prompt uses?)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build model build/mtplx CUDA=1 > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
mkdir -p /tmp/tr
for mode in lazy eager; do
  E=; [ $mode = eager ] && E="CUDA_MODULE_LOADING=EAGER"
  env $E MTPLX_SCHED_TRACE=/tmp/tr/trace-$mode.txt build/mtplx serve --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
  port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
  [ -n "$port" ] || { echo "serve did not start"; cat /tmp/s.err; kill $pid; continue; }
  U=http://127.0.0.1:$port
  echo "+ $mode: policy 1,8" | tee -a $L; timeout 40 python3 bench/streams.py $U --streams 1,8 --max-tokens 256 --rounds 1 2>&1 | tail -2 | tee -a $L
  n0=$(wc -l < /tmp/tr/trace-$mode.txt); echo "trace lines before the long prompt: $n0" | tee -a $L
  echo "+ $mode: long prompt beside 4 streams" | tee -a $L
  timeout 60 python3 bench/streams.py $U --streams 4 --max-tokens 1024 --long-prompt 4000 --long-delay 0.05 --rounds 3 2>&1 | tail -3 | tee -a $L
  sleep 0.5; kill $pid; wait $pid
done
tar -C /tmp/tr -cJf $OUT/traces.tar.xz .
echo "total $(el) s" | tee -a $L
