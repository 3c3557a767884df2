#!/usr/bin/env bash
# lead, session 7, call 4: GEMM threshold A/B on the small model (already in /tmp from call 3)
M=/tmp/qwen35-small-code; [ -f $M/config.json ] || { echo "no model (machine restarted)"; exit 1; }
for g in 17 "" 17; do
  MTPLX_CUDA_GEMM_MIN=$g MTPLX_SCHED_VERBOSE=1 build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
  port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
  echo "+ GEMM_MIN=$g"; grep "trunk forward, [14]+" /tmp/s.err
  U=http://127.0.0.1:$port
  timeout 20 python3 bench/streams.py $U --streams 1,8 --depth 3 --max-tokens 256 --rounds 2 2>&1 | tail -4
  timeout 10 python3 bench/streams.py $U --streams 8 --depth 0 --max-tokens 256 --rounds 1 2>&1 | tail -1
  kill $pid; wait $pid
done 2>&1 | tee $OUT/gemm17.txt
