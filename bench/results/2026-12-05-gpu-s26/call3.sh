#!/usr/bin/env bash
# session 26 call 3: call 2's serve requests on the 27B-16l q4 all ended finish=error (HTTP 500) at
# --prefill-chunk 64 and at the default alike; find out why: the server's log for a ~3k-token and a
# ~200-token prompt, on the 27B-16l q4 (tiny model's tokenizer copied in) and on the embedded model.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
scripts/device-build.sh build CUDA=1 > /tmp/b.log 2>&1 || { tail -20 /tmp/b.log; exit 1; }
echo "built $(( $(date +%s)-t0 )) s" | tee -a $L
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet 2>&1 | tail -1
cp models/qwen35-tiny-code/tokenizer.json models/qwen35-tiny-code/tokenizer_config.json /tmp/q27/
req() { # port nchars
python3 - $1 $2 <<'PY'
import json, sys, time, urllib.request, urllib.error
port, n = sys.argv[1], int(sys.argv[2])
text = open('models/qwen35-tiny-code/val_code.txt').read()[20000:20000+n]
body = json.dumps({"model":"m","prompt":text,"max_tokens":4,"temperature":0}).encode()
t=time.time()
try:
    r = urllib.request.urlopen(urllib.request.Request(f"http://localhost:{port}/v1/completions", body, {"Content-Type":"application/json"})).read()
    print("%.3f s ok %s" % (time.time()-t, r[:300]))
except urllib.error.HTTPError as e:
    print("%.3f s HTTP %d %s" % (time.time()-t, e.code, e.read()[:600]))
PY
}
for M in /tmp/q27 models/qwen35-tiny-code; do
  for extra in "" "--prefill-chunk 64"; do
    build/mtplx serve --device cuda --model $M --port 18401 $extra --cache-ram 0 > /tmp/s.log 2>&1 &
    pid=$!
    for i in $(seq 120); do curl -s localhost:18401/health >/dev/null && break; sleep 0.5; done
    echo "== $M $extra" | tee -a $L
    for n in 12000 700; do echo "  $n chars: $(req 18401 $n)" | tee -a $L; done
    kill $pid; wait $pid 2>/dev/null
    head -c 3000 /tmp/s.log | tee -a $L
  done
done
echo "total $(( $(date +%s)-t0 )) s" | tee -a $L
