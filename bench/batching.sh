#!/usr/bin/env bash
# batching.sh — the continuous-batching figures of bench/batching.md, on an idle machine:
#   1. aggregate tok/s, TTFT and inter-chunk gaps for 1, 2, 4, 8, 16 concurrent streams through
#      `mtplx serve` (bench/streams.mjs: OpenAI SDK, streaming, T 0.6 / top_p 0.95 / top_k 20,
#      256-token completions), depth policy on (requests without mtplx.depth), per model;
#   2. the depth-policy evidence: 8 streams with the depth pinned to 0..D, and 1 stream at each depth;
#   3. chunked prefill: 4 streams decoding while a ~4000-token prompt joins; the others' longest
#      gap during its prefill against their median gap.
# Usage: bash bench/batching.sh OUTDIR [MODEL_DIR...]   (default: the embedded and the small model)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/batching.sh OUTDIR [MODEL...]}
shift
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(models/qwen35-tiny-code ../shared/models/qwen35-small-code)
mkdir -p "$out"
{ lscpu | grep -E 'Model name|^CPU\(s\)'; uname -r; git rev-parse --short HEAD; } >"$out/machine.txt"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null || true' EXIT

serve() { # serve MODEL ARGS...: start, set $port
    build/mtplx serve --model "$1" --port 0 --quiet --ctx 8192 "${@:2}" >"$out/serve.out" 2>"$out/serve.err" &
    pid=$!
    port=
    for _ in $(seq 1 600); do
        port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out/serve.out")
        [ -n "$port" ] && return 0
        sleep 0.1
    done
    echo "server did not start"; cat "$out/serve.err"; exit 1
}
stop() { kill "$pid"; wait "$pid" || true; pid=; }

for m in "${models[@]}"; do
    name=$(basename "$m")
    depth=3
    [ "$name" = qwen35-small-code ] && depth=5 # the best single-stream depth (bench/decode.md)
    serve "$m" --max-seqs 16 --depth "$depth"
    node bench/streams.mjs "http://127.0.0.1:$port" --streams 1,2,4,8,16 --max-tokens 256 | tee "$out/$name.streams.md"
    for d in $(seq 0 "$depth"); do
        echo "## pinned depth $d" >>"$out/$name.pinned.md"
        node bench/streams.mjs "http://127.0.0.1:$port" --streams 1,8 --max-tokens 256 --depth "$d" | tee -a "$out/$name.pinned.md"
    done
    node bench/streams.mjs "http://127.0.0.1:$port" --streams 4 --max-tokens 256 --long-prompt 4000 | tee "$out/$name.longprompt.md"
    curl -s "http://127.0.0.1:$port/metrics" | grep -E '^mtplx_(rows_per|forward|kv_pages|sequences)' >"$out/$name.metrics.txt"
    stop
done
