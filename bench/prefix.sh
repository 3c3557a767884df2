#!/usr/bin/env bash
# bench/prefix.sh — the prefix cache's two benchmarks (docs/prefix-cache.md, results in bench/prefix.md):
#  1. second turn of a conversation with a HIST-token history: TTFT cold vs cached (bench/prefix_bench.c)
#  2. replay of a multi-turn agent trace (system prompt + tools + 10 turns with tool results) through
#     `mtplx serve` (an 11k-token system prompt + 16 tools, as real agents send; --ctx 32768): the share of
#     prompt tokens served from the cache (bench/prefix_agent.mjs; SMALL=1 for the older 1.4k-token trace)
# Usage: bash bench/prefix.sh [MODEL_DIR] [HIST]   (default ../shared/models/qwen35-small-code, 4000)
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-../shared/models/qwen35-small-code}
HIST=${2:-4000}
make -s build/libmtplx.a build/mtplx
mkdir -p build/bench
gcc -O2 -std=c17 -D_GNU_SOURCE -o build/bench/prefix_bench bench/prefix_bench.c build/libmtplx.a \
    $(pkg-config --libs jansson libpcre2-8 libutf8proc) -lpthread -lm
build/bench/prefix_bench "$MODEL" "$MODEL/val_code.txt" "$HIST" 40 3 3
tmp=$(mktemp -d)
trap 'kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
build/mtplx serve --model "$MODEL" --host 127.0.0.1 --port 0 --quiet --max-seqs 2 --ctx 32768 >"$tmp/out" 2>"$tmp/err" &
pid=$!
port=
for _ in $(seq 1 600); do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/out")
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/err"; exit 1; }
    sleep 0.1
done
node bench/prefix_agent.mjs "http://127.0.0.1:$port"
