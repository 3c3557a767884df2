#!/usr/bin/env bash
# prefix_cache.sh — the prefix cache end to end (docs/prefix-cache.md): a multi-turn chat against the
# ASan/UBSan server with the cache and a small KV page budget (so checkpoints get evicted and pages
# reclaimed) gives the same replies as an optimised server without it (--cache-ram 0), and reports the
# reused tokens (tests/js/prefix_cache.mjs). Both shut down cleanly; no sanitizer report.
set -u
cd "$(dirname "$0")/../.."
unset MTPLX_API_KEY
[ -x build/mtplx ] && [ -x build/asan/mtplx ] || { echo "build/mtplx and build/asan/mtplx are needed (make test builds them)"; exit 1; }
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# start BIN NAME ARGS...: sets $port and $pid
start() {
    local bin=$1 name=$2; shift 2
    "$bin" serve --host 127.0.0.1 --port 0 --quiet "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 600); do
        port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.out")
        [ -n "$port" ] && return 0
        kill -0 "$pid" 2>/dev/null || { echo "$name exited early:"; cat "$tmp/$name.err"; return 1; }
        sleep 0.1
    done
    echo "$name did not start"; return 1
}

stop() {
    local p=$1 name=$2
    kill -TERM "$p"
    for _ in $(seq 1 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then echo "$name did not stop on SIGTERM"; return 1; fi
    wait "$p" || { echo "$name exited with $?"; cat "$tmp/$name.err"; return 1; }
}

fail=0
# 2 at once, 80 pages of 16 (1280 positions): a few conversations' checkpoints do not all fit
start build/asan/mtplx hot --max-seqs 2 --ctx 512 --kv-pages 80 --cache-ram 64 || exit 1
hot_pid=$pid hot_port=$port
start build/mtplx cold --max-seqs 2 --ctx 512 --cache-ram 0 || exit 1
cold_pid=$pid cold_port=$port
timeout 900 node tests/js/prefix_cache.mjs "http://127.0.0.1:$hot_port" "http://127.0.0.1:$cold_port" || fail=1
stop "$hot_pid" hot || fail=1
stop "$cold_pid" cold || fail=1
if grep -qE "LeakSanitizer|AddressSanitizer|runtime error:" "$tmp/hot.err"; then
    echo "sanitizer report from the server:"; head -60 "$tmp/hot.err"; fail=1
fi
[ $fail -eq 0 ] && echo "prefix cache integration: all passed"
exit $fail
