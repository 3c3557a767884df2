#!/usr/bin/env bash
# doctor.sh — `mtplx doctor` (sanitizer build): all checks pass on the embedded model; a hub-cache
# snapshot whose blobs match their sha256 names passes, a flipped byte in one fails the model check
# (exit 1, the file named, a fix printed); a truncated safetensors header fails; a busy port and
# MTPLX_THREADS above the CPU count are warnings (exit 0); a knob not of its kind (MTPLX_KERNEL=avx3)
# fails doctor's env check and stops `run`; an unwritable cache fails. `mtplx --version` names the commit
# the binary was built from (this checkout's, when it is one), and takes no arguments.
set -euo pipefail
cd "$(dirname "$0")/../.."
M=build/asan/mtplx
[ -x "$M" ] || M=build/mtplx
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
tmp=$(mktemp -d)
pypid=""
trap '[ -n "$pypid" ] && kill "$pypid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
status_of() { # json name -> status
    node -e 'const j=JSON.parse(require("fs").readFileSync(0,"utf8")); const c=j.checks.find(c=>c.name===process.argv[1]); console.log(c?c.status+" "+c.fix:"missing")' "$2" <"$1"
}
E=models/qwen35-tiny-code

"$M" doctor --model $E --cache "$tmp/cache" --json --port 1 >"$tmp/ok.json" 2>"$tmp/err" || fail "doctor on the embedded model: $(cat "$tmp/err")"
[ "$(status_of "$tmp/ok.json" model | cut -d' ' -f1)" = ok ] || fail "model check not ok: $(cat "$tmp/ok.json")"
[ "$(status_of "$tmp/ok.json" cpu | cut -d' ' -f1)" = ok ] || fail "cpu check not ok"
grep -q 'kernel path [a-z0-9]* (best this CPU runs' "$tmp/ok.json" || fail "no kernel path named"
"$M" doctor --model $E --cache "$tmp/cache" --port 1 >"$tmp/ok.txt" 2>&1 || fail "text mode"
grep -q '^ok    model' "$tmp/ok.txt" || fail "text mode lacks the model line: $(cat "$tmp/ok.txt")"

# --version / version / -V: one text; its first line the build's commit, which is this checkout's (the
# suite builds first; "-dirty" aside: a test may leave files behind), its last the backends
v=$("$M" --version) || fail "--version failed"
[ "$("$M" version)" = "$v" ] && [ "$("$M" -V)" = "$v" ] || fail "version, -V and --version differ"
c=$(printf '%s\n' "$v" | sed -n '1s/^mtplx //p')
[ -n "$c" ] || fail "--version's first line is not 'mtplx COMMIT': $v"
if g=$(git describe --always --dirty 2>/dev/null); then
    [ "${c%-dirty}" = "${g%-dirty}" ] || fail "--version names $c, the checkout is $g"
else
    [ "$c" = unknown ] || fail "no git checkout, yet --version names $c"
fi
printf '%s\n' "$v" | grep -q '^backends: cpu' || fail "--version lacks the backends line: $v"
# doctor names the same build: the text's first line, the JSON's "version"
[ "$(head -1 "$tmp/ok.txt")" = "mtplx $c (mtplx --version)" ] || fail "doctor's first line: $(head -1 "$tmp/ok.txt")"
node -e 'const j=JSON.parse(require("fs").readFileSync(0,"utf8")); if (j.version !== process.argv[1]) process.exit(1)' "$c" \
    <"$tmp/ok.json" || fail "doctor --json's version is not $c"
rc=0; "$M" version extra >/dev/null 2>"$tmp/verr" || rc=$?
[ $rc = 2 ] && grep -q 'takes no arguments' "$tmp/verr" || fail "version with an argument: rc $rc, $(cat "$tmp/verr")"

# the pack cache: its .qpack files counted and sized, other files not; off says so
mkdir -p "$tmp/qpack"
head -c 1500000 /dev/zero >"$tmp/qpack/a.qpack"; head -c 500000 /dev/zero >"$tmp/qpack/b.qpack"; touch "$tmp/qpack/c.tmp.1"
MTPLX_PACK_CACHE="$tmp/qpack" "$M" doctor --model $E --cache "$tmp/cache" --port 1 --json >"$tmp/pc.json" || fail "doctor with a pack cache"
grep -q '"detail": "[^"]*qpack: 2 files, 2 MB of repacked' "$tmp/pc.json" || fail "pack cache not counted / sized: $(cat "$tmp/pc.json")"
MTPLX_PACK_CACHE=0 "$M" doctor --model $E --cache "$tmp/cache" --port 1 --json | grep -q '"detail": "off (MTPLX_PACK_CACHE=0)' || fail "pack cache off not reported"

# a hub-cache snapshot: files are links to blobs named by their sha256
snap="$tmp/hub/models--t--m/snapshots/abc"; blobs="$tmp/hub/models--t--m/blobs"
mkdir -p "$snap" "$blobs"
cp $E/config.json "$snap/"
for f in $E/model-0000*-of-00004.safetensors $E/model.safetensors.index.json; do
    h=$(sha256sum "$f" | cut -d' ' -f1)
    cp "$f" "$blobs/$h"
    ln -s "../../blobs/$h" "$snap/$(basename "$f")"
done
"$M" doctor --model "$snap" --cache "$tmp/cache" --port 1 --json >"$tmp/snap.json" || fail "doctor on a good snapshot failed: $(cat "$tmp/snap.json")"
grep -q 'sha256 of every hub blob matches (5 files)' "$tmp/snap.json" || fail "blobs not verified: $(cat "$tmp/snap.json")"
# flip one byte of tensor data (the header stays valid: only the checksum can tell)
b2=$(readlink "$snap/model-00002-of-00004.safetensors" | xargs basename)
size=$(stat -c %s "$blobs/$b2")
printf '\x5a' | dd of="$blobs/$b2" bs=1 seek=$((size - 3)) conv=notrunc status=none
rc=0; "$M" doctor --model "$snap" --cache "$tmp/cache" --port 1 --json >"$tmp/bad.json" || rc=$?
[ $rc = 1 ] || fail "a corrupted blob gave exit $rc"
s=$(status_of "$tmp/bad.json" model)
case "$s" in fail*pull*) ;; *) fail "corrupted blob: model check says '$s'";; esac
grep -q 'model-00002-of-00004.safetensors' "$tmp/bad.json" || fail "the damaged file is not named"
"$M" doctor --model "$snap" --cache "$tmp/cache" --port 1 --no-checksums --json >/dev/null || fail "--no-checksums still hashed"

# a truncated header
mkdir -p "$tmp/trunc"
cp $E/config.json $E/model.safetensors.index.json "$tmp/trunc/"
for f in $E/model-0000*-of-00004.safetensors; do ln -s "$PWD/$f" "$tmp/trunc/"; done
rm "$tmp/trunc/model-00003-of-00004.safetensors"
head -c 100 $E/model-00003-of-00004.safetensors >"$tmp/trunc/model-00003-of-00004.safetensors"
rc=0; "$M" doctor --model "$tmp/trunc" --cache "$tmp/cache" --port 1 --json >"$tmp/trunc.json" || rc=$?
[ $rc = 1 ] && [ "$(status_of "$tmp/trunc.json" model | cut -d' ' -f1)" = fail ] || fail "truncated file: exit $rc $(cat "$tmp/trunc.json")"

# warnings: a busy port, too many threads; a failure: an unwritable cache
python3 -c 'import socket,time,sys; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' >"$tmp/port" &
pypid=$!
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")
MTPLX_THREADS=256 "$M" doctor --model $E --cache "$tmp/cache" --port "$port" --json >"$tmp/warn.json" || fail "warnings must not fail: $(cat "$tmp/warn.json")"
case "$(status_of "$tmp/warn.json" port)" in warn*"--port"*) ;; *) fail "busy port not warned: $(status_of "$tmp/warn.json" port)";; esac
case "$(status_of "$tmp/warn.json" threads)" in warn*MTPLX_THREADS*) ;; *) fail "MTPLX_THREADS above the CPUs not warned";; esac
# a knob that is not of its kind (every load would refuse it): a fail naming it, not a silent default
rc=0; MTPLX_KERNEL=avx3 "$M" doctor --model $E --cache "$tmp/cache" --port 1 --json >"$tmp/knob.json" || rc=$?
case "$rc $(status_of "$tmp/knob.json" env)" in "1 fail"*) ;; *) fail "bad MTPLX_KERNEL: exit $rc $(status_of "$tmp/knob.json" env)";; esac
grep -q 'MTPLX_KERNEL=avx3: expected one of' "$tmp/knob.json" || fail "bad MTPLX_KERNEL not named: $(cat "$tmp/knob.json")"
rc=0; MTPLX_THREADS=lots "$M" run --model $E --prompt hi --max-tokens 1 >/dev/null 2>"$tmp/knob.err" || rc=$?
[ $rc != 0 ] && grep -q "MTPLX_THREADS=lots" "$tmp/knob.err" || fail "run with MTPLX_THREADS=lots: exit $rc $(cat "$tmp/knob.err")"
mkdir -p "$tmp/ro"; chmod 555 "$tmp/ro"
if [ "$(id -u)" != 0 ]; then
    rc=0; "$M" doctor --model $E --cache "$tmp/ro/hub" --port 1 --json >"$tmp/ro.json" || rc=$?
    [ $rc = 1 ] && [ "$(status_of "$tmp/ro.json" cache | cut -d' ' -f1)" = fail ] || fail "unwritable cache: exit $rc"
else
    echo "SKIP doctor_unwritable_cache: running as root, every directory is writable"
fi
echo "doctor.sh: ok"
