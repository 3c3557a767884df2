#!/usr/bin/env bash
# session 27 call 1 (H200 or H100 + 16-core Xeon host): issue 12's chunked-prefill bar on the GPU after
# session 26 made a lone prompt's chunk 512 rows there (was 64): 4 streams decoding, a ~4,000-token
# prompt joining 0.3 s later; the client's figure (bench/streams.py) and the server's own delivery trace
# (MTPLX_SSE_TRACE + bench/delivery_gaps.py). Embedded model, then the 27B-16l q4 (random weights, the
# tiny tokenizer copied in: its sampled padding ids now decode to no text instead of HTTP 500). Then
# serve's new --draft-quant (default q4, as run/bench always had; serve drafted at full precision):
# embedded model, 1 and 8 streams, q4 vs none, alternated.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "built $(el) s" | tee -a $L
gaps() { # model-dir tag max-tokens
  local tr=/tmp/tr-$2; rm -rf $tr; mkdir -p $tr
  MTPLX_SSE_TRACE=$tr/sse MTPLX_SCHED_TRACE=$tr/sched build/mtplx serve --device cuda --model $1 --port 0 --quiet \
      --max-seqs 16 > /tmp/s-$2.out 2>$OUT/serve-$2.err & local pid=$!
  local port=; for _ in $(seq 1 600); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s-$2.out); [ -n "$port" ] && break; sleep 0.1; done
  echo "== $2 ($1) port $port, up $(el) s" | tee -a $L
  timeout 150 python3 bench/streams.py http://127.0.0.1:$port --streams 4 --max-tokens $3 --rounds 3 \
      --long-prompt 4000 --long-delay 0.3 2>&1 | tail -14 | tee -a $L
  kill -INT $pid; wait $pid
  python3 bench/delivery_gaps.py $tr/sse $tr/sched --top 6 2>&1 | head -40 | tee -a $L
  grep -c " 500 \|finish=error" $OUT/serve-$2.err | sed 's/^/errors in serve log: /' | tee -a $L
  tail -3 $OUT/serve-$2.err >> $L
}
gaps models/qwen35-tiny-code tiny 256
dq() { # draft-quant tag
  build/mtplx serve --device cuda --port 0 --quiet --max-seqs 16 --draft-quant $1 > /tmp/d.out 2>/dev/null & local pid=$!
  local port=; for _ in $(seq 1 600); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/d.out); [ -n "$port" ] && break; sleep 0.1; done
  head -1 /tmp/d.out | tee -a $L
  timeout 60 python3 bench/streams.py http://127.0.0.1:$port --streams 1,8 --max-tokens 256 --rounds 2 --warmup 1 2>&1 | grep -E "^\| (1|8) |mean|ratio" | sed "s/^/$1 /" | tee -a $L
  kill -INT $pid; wait $pid
}
for pass in 1 2; do dq q4; dq none; done
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet 2>&1 | tail -1 | tee -a $L
cp models/qwen35-tiny-code/tokenizer.json models/qwen35-tiny-code/tokenizer_config.json /tmp/q27/
echo "synth $(el) s" | tee -a $L
[ $(el) -lt 420 ] && gaps /tmp/q27 q27 96
echo "total $(el) s" | tee -a $L
