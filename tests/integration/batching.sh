#!/usr/bin/env bash
# batching.sh — continuous batching end to end on the ASan/UBSan build of `mtplx serve`: 32 clients
# for 20 s (tests/js/batch_load.mjs) with cancels and hang-ups, 8 generations at once through a small
# KV page budget (requests wait for pages); every completed answer equals its solo answer, the server
# ends idle with every KV page free, shuts down cleanly on SIGTERM and has no sanitizer report. A
# request that the KV pool could never hold gets 503 with the numbers.
# The long run for bench/batching.md is the same script with SECONDS=180.
set -u
cd "$(dirname "$0")/../.."
unset MTPLX_API_KEY
[ -x build/asan/mtplx ] || { echo "build/asan/mtplx is needed (make test builds it)"; exit 1; }
[ -d tests/js/node_modules/openai ] || bash scripts/npm-deps.sh
. tests/integration/lib.sh
it_init
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# 8 at once, 384 positions of KV pages: fewer than 8 requests' worst cases, so some wait for pages
serve_start build/asan/mtplx server --quiet --max-seqs 8 --kv-pages "$(kv_pages 384)" --ctx 256 --max-queue 256 || exit 1
fail=0
timeout 900 node tests/js/batch_load.mjs "http://127.0.0.1:$port" "${SECONDS_LOAD:-20}" "${CLIENTS:-32}" || fail=1
serve_stop "$pid" server || fail=1
sanitizer_clean "$tmp/server.err" || fail=1
# a request the KV pool can never hold: 503 naming the numbers, at once (not a wait); a small one works
serve_start build/mtplx tight --quiet --kv-pages "$(kv_pages 128)" --ctx 256 || exit 1
code=$(curl -s -o "$tmp/big" -w '%{http_code}' "http://127.0.0.1:$port/v1/completions" -H 'content-type: application/json' \
       -d '{"prompt":"def f(x):","max_tokens":200}')
{ [ "$code" = 503 ] && grep -q "KV cache holds 128 positions" "$tmp/big"; } || { echo "oversized request: $code $(cat "$tmp/big")"; fail=1; }
code=$(curl -s -o "$tmp/small" -w '%{http_code}' "http://127.0.0.1:$port/v1/completions" -H 'content-type: application/json' \
       -d '{"prompt":"def f(x):","max_tokens":20}')
[ "$code" = 200 ] || { echo "a request that fits the KV pool: $code $(cat "$tmp/small")"; fail=1; }
serve_end "$pid"
[ $fail -eq 0 ] && echo "batching: all passed"
exit $fail
