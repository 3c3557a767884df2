#!/usr/bin/env bash
# webui.sh — the browser UI of `mtplx serve` (web/, embedded in the binary) in a real Chromium:
# tests/js/webui.mjs drives Debian's `chromium` through npm playwright-core against two servers on
# the embedded model, one open and one with an API key. Loopback only, free ports, bounded waits.
# With MTPLX_WEBUI_SHOTS=DIR it also writes the README's screenshots there (docs/img), and prints
# page weight and first paint either way (bench/webui.md records them).
set -u
cd "$(dirname "$0")/../.."
unset MTPLX_API_KEY
[ -x build/mtplx ] || { echo "build/mtplx is needed (make test builds it)"; exit 1; }
[ -d tests/js/node_modules/playwright-core ] || bash scripts/npm-deps.sh
command -v chromium >/dev/null || MTPLX_TEST_DEPS=1 bash scripts/deps.sh
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT

# start NAME ARGS...: runs `mtplx serve --port 0 ARGS`, waits for its "listening" line, sets $port
start() {
    local name=$1; shift
    build/mtplx serve --host 127.0.0.1 --port 0 --quiet "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pids+=($!)
    disown
    for _ in $(seq 1 600); do
        port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.out")
        [ -n "$port" ] && return 0
        kill -0 "${pids[-1]}" 2>/dev/null || { echo "$name exited early:"; cat "$tmp/$name.err"; return 1; }
        sleep 0.1
    done
    echo "$name did not start"; return 1
}

start open || exit 1
open_port=$port
start keyed --api-key webui-test-key --ctx 256 || exit 1
keyed_port=$port
args=()
[ -n "${MTPLX_WEBUI_SHOTS:-}" ] && args+=(--screenshots "$MTPLX_WEBUI_SHOTS")
# the browser gets its own HOME: Chromium writes its profile and crash database there
HOME="$tmp" timeout 300 node tests/js/webui.mjs "http://127.0.0.1:$open_port" "http://127.0.0.1:$keyed_port" webui-test-key \
    "${args[@]}" --measure "$tmp/measure.json" || exit 1
echo "webui: all passed"
