#!/bin/bash
# A/B: bc8a51f (write-through at every request end) vs s37 (deferred to idle)
cd /work/s37
for bin in old new old new; do
  exe=/tmp/mtplx-old; [ $bin = new ] && exe=/work/s37/build/mtplx
  rm -rf /tmp/cg-$bin
  $exe serve --model /tmp/b2q4 --port 8731 --max-seqs 2 --cache-dir /tmp/cg-$bin --quiet > /tmp/cg-$bin.log 2>&1 &
  pid=$!
  for i in $(seq 90); do curl -s localhost:8731/health >/dev/null && break; sleep 1; done
  echo "== $bin ($exe)"
  python3 bench/cache_write_gap.py http://127.0.0.1:8731 --prompt-tokens 1500 --max-tokens 600 --rounds 1 | tail -1
  curl -s localhost:8731/metrics | grep -E "disk_(writes_total|marked) "
  kill $pid; wait $pid 2>/dev/null
done
