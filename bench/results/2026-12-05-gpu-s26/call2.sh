#!/usr/bin/env bash
# session 26 call 2 (H100 or H200 + 16-core Xeon host): gpu-test on the tree with the CUDA prefill chunk
# at 512 (call 1, ../2026-12-05-gpu-s25/call1-out: 128 -> 512 rows +31% on the 27B-16l q4 4k prefill) and
# serve's lone-prompt chunk taken from the backend (was 64 on a GPU); then serve TTFT of a ~3.5k-token
# prompt on the 27B-16l q4 with --prefill-chunk 64 against the new default, alternated; then the CPU's
# three-phase attention at 16 threads again (call 1 was noisy).
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
timeout 330 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^FAIL" -A6 $OUT/gpu-test.txt | head -40 | tee -a $L
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet 2>&1 | tail -1
cp models/qwen35-tiny-code/tokenizer.json models/qwen35-tiny-code/tokenizer_config.json /tmp/q27/
echo "27B-16l q4 prefill 4096, default chunk: $(timeout 60 build/mtplx bench --device cuda --model /tmp/q27 --prefill 4096 2>&1 | grep -iE 'tok/s' | tail -1)" | tee -a $L
ttft() { # chunk-arg port
  build/mtplx serve --device cuda --model /tmp/q27 --port $2 $1 --cache-ram 0 > $OUT/serve-$2.log 2>&1 &
  local pid=$!
  for i in $(seq 120); do curl -s localhost:$2/health >/dev/null && break; sleep 0.5; done
  local out=""
  for r in 1 2 3; do
    out="$out $(python3 - $2 $r <<'PY'
import json, sys, time, urllib.request
port, r = sys.argv[1], int(sys.argv[2])
src = open('models/qwen35-tiny-code/val_code.txt').read()
text = src[r*20000:r*20000+12000]
body = json.dumps({"model":"m","prompt":text,"max_tokens":1,"temperature":0}).encode()
t=time.time()
try:
    j = json.loads(urllib.request.urlopen(urllib.request.Request(f"http://localhost:{port}/v1/completions", body, {"Content-Type":"application/json"})).read())
    n = j["usage"]["prompt_tokens"]
except Exception as e:
    n = "err %s" % e
print("%.3f s (%s tok)" % (time.time()-t, n))
PY
)"
  done
  kill $pid; wait $pid 2>/dev/null
  echo "$out"
}
for pass in 1 2; do
  [ $(el) -gt 480 ] && break
  echo "serve TTFT 27B-16l q4, --prefill-chunk 64: $(ttft '--prefill-chunk 64' 18301)" | tee -a $L
  echo "serve TTFT 27B-16l q4, default chunk:     $(ttft '' 18302)" | tee -a $L
done
grep -h "prompt=" $OUT/serve-*.log | tail -4 | tee -a $L
rm -f $OUT/serve-*.log
build/mtplx synth --config bench/configs/qwen35-small-code.json --out /tmp/small --quiet 2>&1 | tail -1
for r in 1 2 3; do for s in 0 2048; do
  [ $(el) -gt 560 ] && break
  echo "small 16 thr ATT_SPLIT=$s ctx 16384: $(MTPLX_THREADS=16 MTPLX_ATT_SPLIT=$s timeout 40 build/mtplx bench --device cpu --model /tmp/small --verify-cost --rows 2 --reps 21 --context 16384 2>&1 | grep -E '(1|2)-row forward' | tr -s ' ' | tr '\n' '|')" | tee -a $L
done; done
echo "total $(el) s" | tee -a $L
