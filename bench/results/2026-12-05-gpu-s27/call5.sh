#!/usr/bin/env bash
# session 27 call 5 (= call 3 after both scheduler fixes: history chunks ride along; fresh sequences waited for at most wait_ms): issue 12's chunked-prefill bar without the cold start. Call 2's cold round (10x the
# median gap) had every step 3-10x its calibrated cost while kernels ran for the first time (the steps
# fell back to their calibrated cost within ~30 ms) and its later rounds found the long prompt in the
# prefix cache (TTFT 10 ms: nothing chunked). Here: --cache-ram 0 (every round reads the prompt), one
# warm-up round unreported; embedded model, then the 27B-16l q4 shape with an 8,192-id vocabulary.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
gaps() { # model-dir tag max-tokens delay
  local tr=/tmp/tr5-$2; rm -rf $tr; mkdir -p $tr
  MTPLX_SSE_TRACE=$tr/sse MTPLX_SCHED_TRACE=$tr/sched build/mtplx serve --device cuda --model $1 --port 0 --quiet \
      --max-seqs 16 --cache-ram 0 > /tmp/s-$2.out 2>$OUT/serve-$2.err & local pid=$!
  local port=; for _ in $(seq 1 600); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s-$2.out); [ -n "$port" ] && break; sleep 0.1; done
  echo "== $2 ($1) up $(el) s: $(head -1 /tmp/s-$2.out)" | tee -a $L
  timeout 200 python3 bench/streams.py http://127.0.0.1:$port --streams 4 --max-tokens $3 --rounds 3 --warmup 1 \
      --long-prompt 4000 --long-delay $4 2>&1 | tail -7 | tee -a $L
  kill -INT $pid; wait $pid
  python3 bench/delivery_gaps.py $tr/sse $tr/sched --top 6 2>&1 | head -10 | tee -a $L
  grep -c "finish=error" $OUT/serve-$2.err | sed 's/^/errors in serve log: /' | tee -a $L
}
gaps models/qwen35-tiny-code tiny 2048 0.05
if [ ! -d /tmp/q27v ]; then
  [ -d /tmp/q27 ] || build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /dev/null 2>&1
  python3 - <<'PY'
import json
c = json.load(open('/tmp/q27/config.json'))
for d in (c, c.get('text_config', {})):
    if 'vocab_size' in d: d['vocab_size'] = 8192
    if 'eos_token_id' in d: d['eos_token_id'] = [8185, 8183]
    for k in ('bos_token_id', 'pad_token_id'):
        if k in d: d[k] = 8183
json.dump(c, open('/tmp/q27v.json', 'w'))
PY
  build/mtplx synth --config /tmp/q27v.json --dtype q4 --out /tmp/q27v --quiet 2>&1 | tail -1 | tee -a $L
  cp models/qwen35-tiny-code/tokenizer.json models/qwen35-tiny-code/tokenizer_config.json /tmp/q27v/
fi
echo "synth $(el) s" | tee -a $L
[ -f /tmp/q27v/config.json ] && gaps /tmp/q27v q27v 512 0.3
echo "total $(el) s" | tee -a $L
