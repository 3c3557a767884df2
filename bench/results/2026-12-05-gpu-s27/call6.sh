#!/usr/bin/env bash
# session 27 call 6: issue 12's chunked-prefill bar after the scheduler fixes (calls 4-5) and the prompt
# cache's kept snapshot, with streams.py's long prompt new each round (the default prefix cache cannot
# serve it): the default server (prefix cache on) and --cache-ram 0, embedded model; then the 27B-16l q4
# shape (8,192-id vocabulary) with the default server.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
gaps() { # model-dir tag max-tokens delay [serve args]
  local m=$1 tag=$2 mt=$3 dl=$4; shift 4
  local tr=/tmp/tr6-$tag; rm -rf $tr; mkdir -p $tr
  MTPLX_SSE_TRACE=$tr/sse MTPLX_SCHED_TRACE=$tr/sched build/mtplx serve --device cuda --model $m --port 0 --quiet \
      --max-seqs 16 "$@" > /tmp/s-$tag.out 2>$OUT/serve-$tag.err & local pid=$!
  local port=; for _ in $(seq 1 600); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s-$tag.out); [ -n "$port" ] && break; sleep 0.1; done
  echo "== $tag ($m $*) up $(el) s" | tee -a $L
  timeout 200 python3 bench/streams.py http://127.0.0.1:$port --streams 4 --max-tokens $mt --rounds 3 --warmup 1 \
      --long-prompt 4000 --long-delay $dl 2>&1 | grep -E "^\| 4 " | tee -a $L
  kill -INT $pid; wait $pid
  python3 bench/delivery_gaps.py $tr/sse $tr/sched --top 4 2>&1 | sed -n 3,6p | tee -a $L
  python3 - $tr/sched <<'PY' | tee -a $L
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith('#')]
late = sum(1 for r in rows if float(r[1]) > 1.9); lock = sum(1 for r in rows if float(r[2]) > 0.5)
print(f"steps {len(rows)}: {late} after a gap > 1.9 ms, {lock} waited > 0.5 ms for the lock")
PY
}
gaps models/qwen35-tiny-code tiny 2048 0.05
gaps models/qwen35-tiny-code tiny-nocache 2048 0.05 --cache-ram 0
if [ ! -d /tmp/q27v ]; then
  build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /dev/null 2>&1
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
  rm -rf /tmp/q27
  build/mtplx synth --config /tmp/q27v.json --dtype q4 --out /tmp/q27v --quiet 2>&1 | tail -1 | tee -a $L
  cp models/qwen35-tiny-code/tokenizer.json models/qwen35-tiny-code/tokenizer_config.json /tmp/q27v/
fi
[ $(el) -lt 330 ] && gaps /tmp/q27v q27v 512 0.3
echo "total $(el) s" | tee -a $L
