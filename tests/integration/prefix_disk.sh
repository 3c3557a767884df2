#!/usr/bin/env bash
# prefix_disk.sh — the prefix cache's disk tier end to end (docs/prefix-cache.md, "The disk tier"),
# every reply compared with a server without a cache (tests/js/prefix_disk.mjs):
#  1. through disk: --cache-ram 1 holds no checkpoint, so turn 2 of four chats (depth 0 and 3, greedy
#     and seeded) is served from files: same replies as cold, >= 60% of the prompt cached;
#  2. restart: a new server on the same --cache-dir resumes turn 3 from disk;
#  3. kill -9 while a checkpoint file is being written (MTPLX_CACHE_WRITE_PAUSE_MS holds the write
#     open): the next server removes the half-written temp file and answers like cold;
#  4. a flipped byte in every file: found (log line, error counted), nothing restored, same reply;
#  5. disk full (a 1 MiB tmpfs as root; without root, a file-size limit, ulimit -f, which fails
#     writes the same way): one log line, the tier turns off, RAM keeps serving;
#  6. a read-only directory: served without the tier, with a log line;
#  7. `mtplx run --cache-dir` twice: the second run restores the prompt from disk, same tokens.
set -u
cd "$(dirname "$0")/../.."
unset MTPLX_API_KEY
[ -x build/mtplx ] || { echo "build/mtplx is needed (make test builds it)"; exit 1; }
. tests/integration/lib.sh
it_init
mounts=()
it_cleanup_hook() {
    for m in ${mounts[@]+"${mounts[@]}"}; do umount "$m" 2>/dev/null; done
    chmod -R u+w "$tmp" 2>/dev/null
}
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
js() { timeout 120 node tests/js/prefix_disk.mjs "$@"; }

# start NAME ARGS...: a server on the embedded model, 2 at once, 1024 positions; sets $port and $pid
start() { local name=$1; shift; serve_start build/mtplx "$name" --quiet --max-seqs 2 --ctx 1024 "$@"; }
stop() { serve_end "$1"; }

metric() { js metric "http://127.0.0.1:$1" "$2"; }

start cold --cache-ram 0 || exit 1
cold_pid=$pid C="http://127.0.0.1:$port"
D=$tmp/cache
mkdir -p "$D"

echo "$(date +%T) servers up"
# 1. everything through disk
start a --cache-ram 1 --cache-dir "$D" || exit 1
a_pid=$pid a_port=$port
js turn 1 "http://127.0.0.1:$a_port" "$C" "$tmp/state.json" >/dev/null || bad "turn 1"
js turn 2 "http://127.0.0.1:$a_port" "$C" "$tmp/state.json" || bad "turn 2 through disk"
hits=$(metric "$a_port" mtplx_prefix_cache_disk_hits_total)
ram=$(metric "$a_port" mtplx_prefix_cache_entries)
[ "${hits%.*}" -ge 4 ] && [ "${ram%.*}" -le 1 ] && ok "turn 2 from disk ($hits disk hits, $ram RAM entries)" \
    || bad "turn 2: $hits disk hits, $ram RAM entries"
stop "$a_pid"

echo "$(date +%T) phase 2"
# 2. restart on the same directory
start b --cache-dir "$D" || exit 1
b_pid=$pid b_port=$port
js turn 3 "http://127.0.0.1:$b_port" "$C" "$tmp/state.json" || bad "turn 3 after a restart"
hits=$(metric "$b_port" mtplx_prefix_cache_disk_hits_total)
# greedy depth 0 and 3 give the same conversation, so the second of them hits RAM: >= 2 from disk
[ "${hits%.*}" -ge 2 ] && ok "after a restart turn 3 resumed from disk ($hits disk hits)" || bad "after a restart: $hits disk hits"
# the conversations RAM still holds reach disk while the server runs: written after each response
# once no request runs (gen_session_persist), not only at shutdown
marked= writes=
for _ in $(seq 1 50); do
    marked=$(metric "$b_port" mtplx_prefix_cache_disk_marked) writes=$(metric "$b_port" mtplx_prefix_cache_disk_writes_total)
    [ "${marked%.*}" = 0 ] && [ "${writes%.*}" -ge 2 ] && break; sleep 0.1
done
[ "${marked%.*}" = 0 ] && [ "${writes%.*}" -ge 2 ] && ok "conversations written while the server runs ($writes files, 0 marked)" \
    || bad "while the server runs: $marked entries still marked, $writes files written"
stop "$b_pid"

echo "$(date +%T) phase 3"
# 3. kill -9 in the middle of a file write
D2=$tmp/cache2
mkdir -p "$D2"
MTPLX_CACHE_WRITE_PAUSE_MS=4000 start k --cache-ram 1 --cache-dir "$D2" || exit 1
k_pid=$pid k_port=$port
js same "http://127.0.0.1:$k_port" "$C" >/dev/null 2>&1 &
req=$!
seen=0
for _ in $(seq 1 200); do ls -a "$D2" | grep -q '^\.tmp-' && { seen=1; break; }; sleep 0.05; done
kill -9 "$k_pid"
wait "$req" 2>/dev/null
[ $seen = 1 ] && ok "a temp file was being written when the server was killed" || bad "no temp file seen before the kill"
start r --cache-dir "$D2" || exit 1
r_pid=$pid r_port=$port
grep -q "removed .tmp-.*did not finish" "$tmp/r.err" && ! ls -a "$D2" | grep -q '^\.tmp-' \
    && ok "the restarted server removed the half-written file" || { bad "half-written file not removed"; cat "$tmp/r.err"; }
js same "http://127.0.0.1:$r_port" "$C" || bad "reply after kill -9 differs from cold"
stop "$r_pid"

echo "$(date +%T) phase 4"
# 4. a flipped byte in every checkpoint file
n=0
for f in "$D"/*.mpc; do
    size=$(stat -c %s "$f")
    off=$((size / 2))
    b=$(od -An -tu1 -j "$off" -N1 "$f" | tr -d ' ')
    printf "$(printf '\\%03o' $(((b ^ 1) & 255)))" | dd of="$f" bs=1 seek="$off" conv=notrunc status=none
    n=$((n + 1))
done
start e --cache-dir "$D" || exit 1
e_pid=$pid e_port=$port
out=$(js same "http://127.0.0.1:$e_port" "$C") || bad "reply with corrupt files differs from cold"
errs=$(metric "$e_port" mtplx_prefix_cache_disk_errors_total)
hits=$(metric "$e_port" mtplx_prefix_cache_disk_hits_total)
[ "$out" = "cached 0" ] && [ "${errs%.*}" -ge 1 ] && [ "$hits" = 0 ] && grep -q "checksum mismatch" "$tmp/e.err" \
    && ok "corrupt files detected ($n flipped, $errs errors, $out)" || { bad "corrupt files: $out, $errs errors, $hits hits"; cat "$tmp/e.err"; }
stop "$e_pid"

echo "$(date +%T) phase 5"
# 5. disk full
F=$tmp/full
mkdir -p "$F"
if mount -t tmpfs -o size=1m tmpfs "$F" 2>/dev/null; then
    mounts+=("$F")
    how="a 1 MiB tmpfs"
    start f --cache-dir "$F" || exit 1
else
    how="ulimit -f 256: files of at most 256 KiB (no mount for a tmpfs)"
    (trap "" XFSZ; ulimit -f 256; exec build/mtplx serve --host 127.0.0.1 --port 0 --quiet --max-seqs 2 --ctx 1024 \
        --cache-dir "$F" >"$tmp/f.out" 2>"$tmp/f.err") &
    pid=$!; pids+=("$pid")
    for _ in $(seq 1 600); do port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/f.out"); [ -n "$port" ] && break; sleep 0.1; done
fi
f_pid=$pid f_port=$port
js same "http://127.0.0.1:$f_port" "$C" >/dev/null || bad "reply on a full disk differs from cold"
for _ in $(seq 1 100); do [ "$(metric "$f_port" mtplx_prefix_cache_disk_on)" = 0 ] && break; sleep 0.1; done
out=$(js same "http://127.0.0.1:$f_port" "$C") || bad "second reply on a full disk differs from cold"
on=$(metric "$f_port" mtplx_prefix_cache_disk_on)
lines=$(grep -c "the disk tier is off" "$tmp/f.err")
[ "$on" = 0 ] && [ "$lines" = 1 ] && [ "$out" != "cached 0" ] && ok "disk full ($how): tier off with one log line, RAM serves ($out)" \
    || { bad "disk full ($how): disk_on $on, $lines log lines, $out"; cat "$tmp/f.err"; }
stop "$f_pid"

echo "$(date +%T) phase 6"
# 6. read-only directory
R=$tmp/ro
mkdir -p "$R"
ro=1
if mount -t tmpfs -o ro,size=1m tmpfs "$R" 2>/dev/null; then mounts+=("$R")
elif [ "$(id -u)" != 0 ]; then chmod 555 "$R"
else ro=0; echo "note: read-only directory not checked (root without mount: every directory is writable)"; fi
[ $ro = 1 ] && { start g --cache-dir "$R" || exit 1; }
[ $ro = 1 ] && {
g_pid=$pid g_port=$port
js same "http://127.0.0.1:$g_port" "$C" >/dev/null || bad "reply on a read-only directory differs from cold"
on=$(metric "$g_port" mtplx_prefix_cache_disk_on)
grep -q "no disk tier.*serving from RAM only" "$tmp/g.err" && [ "$on" = 0 ] && ok "read-only directory: RAM only, with a log line" \
    || { bad "read-only directory: disk_on $on"; cat "$tmp/g.err"; }
stop "$g_pid"
}
stop "$cold_pid"

# 7. mtplx run --cache-dir: a second run of the same prompt restores it from disk, same tokens
RD=$tmp/runcache
runj() { build/mtplx run --prompt "def fibonacci(n):\n    # the n-th Fibonacci number" --max-tokens 12 --temperature 0.8 \
    --seed 5 --depth 3 --quiet --json "$@" | node -e 'const o=JSON.parse(require("fs").readFileSync(0)); console.log(o.stats.cached_tokens, o.tokens.join(","))'; }
r0=$(runj) r1=$(runj --cache-dir "$RD") r2=$(runj --cache-dir "$RD")
[ "${r1#* }" = "${r0#* }" ] && [ "${r2#* }" = "${r0#* }" ] && [ "${r1%% *}" = 0 ] && [ "${r2%% *}" -gt 0 ] \
    && ok "run --cache-dir: the second run restored ${r2%% *} prompt tokens from disk, same tokens" \
    || bad "run --cache-dir: cold '$r0', first '$r1', second '$r2'"
[ $fail -eq 0 ] && echo "prefix disk tier integration: all passed"
exit $fail
