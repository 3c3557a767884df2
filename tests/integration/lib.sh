# lib.sh — scaffolding shared by the integration scripts: `. tests/integration/lib.sh` after the
# script's `cd` to the repo root (tests/run.sh runs every other tests/integration/*.sh, not this one).
# Loopback only: every server picks its own free port (--port 0) and every wait is bounded.
#
#   it_init                      $tmp: a fresh directory; pids=(): the processes to kill at exit. An
#                                EXIT trap kills (-9) every pid in pids, runs it_cleanup_hook if the
#                                script defines one, then removes $tmp.
#   serve_start BIN NAME ARGS... `BIN serve --host 127.0.0.1 --port 0 ARGS` in the background, stdout
#                                in $tmp/NAME.out, stderr in $tmp/NAME.err, its pid added to pids;
#                                waits up to 60 s for its "listening on" line. Sets $pid and $port;
#                                returns 1, saying why, when it exits first or never listens.
#   serve_stop PID NAME          SIGTERM, then up to 30 s for it to exit; returns 1, saying why, when
#                                it is still running or exits with a status other than 0.
#   serve_end PID                SIGTERM, up to 30 s, reaped; no verdict (the server only has to go).
#   sanitizer_clean FILE         returns 1 and shows the report when FILE (a server's stderr) holds
#                                an AddressSanitizer, LeakSanitizer or UBSan report.

it_init() {
    tmp=$(mktemp -d)
    pids=()
    trap it_cleanup EXIT
}

it_cleanup() {
    local p
    for p in ${pids[@]+"${pids[@]}"}; do kill -9 "$p" 2>/dev/null; done
    if declare -F it_cleanup_hook >/dev/null; then it_cleanup_hook; fi
    rm -rf "$tmp"
}

# kv_pages POSITIONS: the --kv-pages that hold POSITIONS positions (the page size as `mtplx serve --help`
# states it), so a script's KV budget stays the same whatever the page size.
kv_pages() {
    local p
    p=$(build/mtplx serve --help 2>&1 | sed -n 's/.*KV cache pages of \([0-9]*\) positions.*/\1/p')
    [ -n "$p" ] || { echo "kv_pages: no page size in 'mtplx serve --help'" >&2; return 1; }
    echo $(( ($1 + p - 1) / p ))
}

serve_start() {
    local bin=$1 name=$2; shift 2
    "$bin" serve --host 127.0.0.1 --port 0 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pid=$!
    pids+=("$pid")
    port=
    for _ in $(seq 1 600); do
        port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.out")
        [ -n "$port" ] && return 0
        kill -0 "$pid" 2>/dev/null || { echo "$name exited early:"; cat "$tmp/$name.err"; return 1; }
        sleep 0.1
    done
    echo "$name did not start"; return 1
}

serve_stop() {
    local p=$1 name=$2 rc=0
    kill -TERM "$p"
    for _ in $(seq 1 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then echo "$name did not stop on SIGTERM"; return 1; fi
    wait "$p" || rc=$?
    [ $rc -eq 0 ] || { echo "$name exited with $rc"; cat "$tmp/$name.err"; return 1; }
}

serve_end() {
    kill -TERM "$1" 2>/dev/null
    for _ in $(seq 1 300); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    wait "$1" 2>/dev/null
    return 0
}

sanitizer_clean() {
    if grep -qE "LeakSanitizer|AddressSanitizer|runtime error:" "$1"; then
        echo "sanitizer report from the server:"; head -60 "$1"; return 1
    fi
}
