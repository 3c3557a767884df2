#!/usr/bin/env bash
# grammar.sh — structured output end to end (docs/structured-output.md): `mtplx run --json-schema`
# over many schemas and MTP depths 0..5 with and without thinking, and the official SDKs'
# structured-output helpers against `mtplx serve`, every output checked by an independent JSON Schema
# validator (ajv; tests/js/grammar_check.mjs). Loopback only, the port chosen by the server.
set -u
cd "$(dirname "$0")/../.."
unset MTPLX_API_KEY
[ -x build/mtplx ] || { echo "build/mtplx is needed (make test builds it)"; exit 1; }
[ -d tests/js/node_modules/ajv ] && [ -d tests/js/node_modules/openai ] || bash scripts/npm-deps.sh
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
build/mtplx serve --host 127.0.0.1 --port 0 --quiet >"$tmp/out" 2>"$tmp/err" &
pid=$!
port=
for _ in $(seq 1 600); do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/out")
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || { echo "server exited early:"; cat "$tmp/err"; exit 1; }
    sleep 0.1
done
[ -n "$port" ] || { echo "server did not start"; exit 1; }
fail=0
MTPLX_THREADS=1 timeout 900 node tests/js/grammar_check.mjs build/mtplx "http://127.0.0.1:$port" || fail=1
kill -TERM "$pid"
for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
wait "$pid" 2>/dev/null
pid=
exit $fail
