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
. tests/integration/lib.sh
it_init
serve_start build/mtplx server --quiet || exit 1
fail=0
MTPLX_THREADS=1 timeout 900 node tests/js/grammar_check.mjs build/mtplx "http://127.0.0.1:$port" || fail=1
serve_end "$pid"
exit $fail
