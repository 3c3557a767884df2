#!/usr/bin/env bash
# A/B on this CPU: 4 streams + a 4,000-token prompt joining 0.05 s in, --cache-ram 0 and default
run() { # bin tag args
  local bin=$1 tag=$2; shift 2
  $bin serve --port 0 --quiet --max-seqs 16 "$@" > /tmp/ab-$tag.out 2>/dev/null & local pid=$!
  local port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/ab-$tag.out); [ -n "$port" ] && break; sleep 0.1; done
  timeout 300 python3 bench/streams.py http://127.0.0.1:$port --streams 4 --max-tokens 256 --rounds 3 --warmup 1 \
      --long-prompt 4000 --long-delay 0.05 2>&1 | grep -E "^\| 4 " | sed "s/^/$tag /" | cut -c1-200
  kill -INT $pid; wait $pid
}
for pass in 1 2; do
  run /tmp/wt-old/build/mtplx old-nocache --cache-ram 0
  run build/mtplx new-nocache --cache-ram 0
  run /tmp/wt-old/build/mtplx old-default
  run build/mtplx new-default
done
