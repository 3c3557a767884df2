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
. tests/integration/lib.sh
it_init

# start NAME ARGS...: `mtplx serve` on the embedded model (disowned: no job report when the trap kills
# it); sets $port
start() { local name=$1; shift; serve_start build/mtplx "$name" --quiet "$@" && disown "$pid"; }

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
