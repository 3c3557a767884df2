#!/usr/bin/env bash
# prefix_cache.sh — the prefix cache end to end (docs/prefix-cache.md): a multi-turn chat against the
# ASan/UBSan server with the cache and a small KV page budget (so checkpoints get evicted and pages
# reclaimed) gives the same replies as an optimised server without it (--cache-ram 0), and reports the
# reused tokens (tests/js/prefix_cache.mjs). Both shut down cleanly; no sanitizer report.
set -u
cd "$(dirname "$0")/../.."
unset MTPLX_API_KEY
[ -x build/mtplx ] && [ -x build/asan/mtplx ] || { echo "build/mtplx and build/asan/mtplx are needed (make test builds them)"; exit 1; }
. tests/integration/lib.sh
it_init
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

fail=0
# 2 at once, 1280 positions of KV pages: a few conversations' checkpoints do not all fit
serve_start build/asan/mtplx hot --quiet --max-seqs 2 --ctx 512 --kv-pages "$(kv_pages 1280)" --cache-ram 64 || exit 1
hot_pid=$pid hot_port=$port
serve_start build/mtplx cold --quiet --max-seqs 2 --ctx 512 --cache-ram 0 || exit 1
cold_pid=$pid cold_port=$port
timeout 900 node tests/js/prefix_cache.mjs "http://127.0.0.1:$hot_port" "http://127.0.0.1:$cold_port" || fail=1
serve_stop "$hot_pid" hot || fail=1
serve_stop "$cold_pid" cold || fail=1
sanitizer_clean "$tmp/hot.err" || fail=1
[ $fail -eq 0 ] && echo "prefix cache integration: all passed"
exit $fail
