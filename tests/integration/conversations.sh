#!/usr/bin/env bash
# conversations.sh — many multi-turn conversations at once through the prefix cache, as coding agents
# load a server (tests/js/conv_load.mjs): a shared system prompt, each turn's prompt the previous one's
# plus its reply, cancels and hang-ups, on a KV page budget far below what the conversations' cached
# prefixes want, so restores (leases), checkpoints and reclaimed pages interleave all the time. Every
# completed reply must equal a cold server's (--cache-ram 0, one request at a time) for the same
# messages. Two hot servers: the ASan/UBSan build with the cache in RAM (no sanitizer report), and the
# optimised build (more interleavings a second) with the disk tier on a smaller budget. Both end idle
# with only the cache's pages held and stop cleanly on SIGTERM.
set -u
cd "$(dirname "$0")/../.."
unset MTPLX_API_KEY
[ -x build/mtplx ] && [ -x build/asan/mtplx ] || { echo "build/mtplx and build/asan/mtplx are needed (make test builds them)"; exit 1; }
[ -d tests/js/node_modules/openai ] || bash scripts/npm-deps.sh
. tests/integration/lib.sh
it_init
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

fail=0
serve_start build/mtplx cold --quiet --max-seqs 1 --ctx 768 --cache-ram 0 || exit 1
cold_pid=$pid cold_port=$port
# 8 at once on 2,048 positions of KV pages (a conversation's turn reserves up to ~500)
serve_start build/asan/mtplx hot --quiet --max-seqs 8 --ctx 768 --kv-pages "$(kv_pages 2048)" --cache-ram 64 || exit 1
timeout 900 node tests/js/conv_load.mjs "http://127.0.0.1:$port" "http://127.0.0.1:$cold_port" 20 12 || fail=1
serve_stop "$pid" hot || fail=1
sanitizer_clean "$tmp/hot.err" || fail=1
# the optimised build, with the disk tier, on 1,024 positions
mkdir -p "$tmp/cache"
serve_start build/mtplx hotdisk --quiet --max-seqs 8 --ctx 768 --kv-pages "$(kv_pages 1024)" --cache-ram 64 \
    --cache-dir "$tmp/cache" || exit 1
timeout 900 node tests/js/conv_load.mjs "http://127.0.0.1:$port" "http://127.0.0.1:$cold_port" 15 12 || fail=1
serve_stop "$pid" hotdisk || fail=1
serve_stop "$cold_pid" cold || fail=1
[ $fail -eq 0 ] && echo "conversations: all passed"
exit $fail
