#!/usr/bin/env bash
# server.sh — end-to-end tests of `mtplx serve` on the embedded model with the official openai and
# @anthropic-ai/sdk clients (tests/js/server_sdk.mjs), then hostile/heavy use (auth, malformed
# requests, limits, disconnect, 50 concurrent streams; tests/js/server_abuse.mjs) against the
# ASan/UBSan build, which must shut down cleanly on SIGTERM with no leak report.
# Loopback only, free ports chosen by the server (--port 0), every wait bounded.
set -u
cd "$(dirname "$0")/../.."
unset MTPLX_API_KEY
[ -x build/mtplx ] && [ -x build/asan/mtplx ] || { echo "build/mtplx and build/asan/mtplx are needed (make test builds them)"; exit 1; }
[ -d tests/js/node_modules/openai ] || bash scripts/npm-deps.sh
. tests/integration/lib.sh
it_init

fail=0
# 1. refusal to bind a non-loopback address without a key (usage error, nothing started)
if build/mtplx serve --host 0.0.0.0 --port 0 >"$tmp/refuse.out" 2>&1; then echo "non-loopback bind without a key was accepted"; fail=1;
elif ! grep -q "API key" "$tmp/refuse.out"; then echo "no reason given for refusing 0.0.0.0:"; cat "$tmp/refuse.out"; fail=1; fi

# 2. the SDK suite on the optimised build
serve_start build/mtplx plain --quiet || exit 1
timeout 600 node tests/js/server_sdk.mjs "http://127.0.0.1:$port" || fail=1
serve_stop "$pid" plain || fail=1

# 3. abuse + concurrency on the ASan build, with a key, a small context and a 1 MiB body limit
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
serve_start build/asan/mtplx asan --quiet --api-key test-key-123 --max-body 1048576 --ctx 128 --max-queue 64 || exit 1
timeout 600 node tests/js/server_abuse.mjs "http://127.0.0.1:$port" test-key-123 || fail=1
serve_stop "$pid" asan || fail=1
sanitizer_clean "$tmp/asan.err" || fail=1
[ $fail -eq 0 ] && echo "server integration: all passed"
exit $fail
