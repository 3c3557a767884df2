#!/usr/bin/env bash
# usage: ttft.sh BIN MODEL CHUNK PORT -> seconds for a ~N-token completion prompt, 1 token out (3 runs, distinct prompts)
BIN=$1 M=$2 C=$3 P=$4
$BIN serve --model $M --port $P ${C:+--prefill-chunk $C} --cache-ram 0 > /tmp/ttft-serve.log 2>&1 &
pid=$!
for i in $(seq 60); do curl -s localhost:$P/health >/dev/null && break; sleep 0.5; done
for r in 1 2 3; do
python3 - $P $r <<'PY'
import json, sys, time, urllib.request
port, r = sys.argv[1], int(sys.argv[2])
src = open('/work/shared/models/qwen35-small-code/val_code.txt').read()
text = src[r*20000:r*20000+12000]
body = json.dumps({"model":"m","prompt":text,"max_tokens":1,"temperature":0}).encode()
t=time.time()
try: urllib.request.urlopen(urllib.request.Request(f"http://localhost:{port}/v1/completions", body, {"Content-Type":"application/json"})).read()
except Exception: pass
print("%.2f s" % (time.time()-t), end=" | ")
PY
done; echo
kill $pid; wait $pid 2>/dev/null
