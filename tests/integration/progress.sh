#!/usr/bin/env bash
# progress.sh — progress on stderr for long work (src/cli/progress.c): `run` (checkpoint load and a
# long prompt's prefill), `convert` and `synth` report when asked to show at once
# (MTPLX_PROGRESS_DELAY=0), stay silent with --quiet / --json and, at the default one-second delay,
# on quick work. The chunked prefill that reports progress gives the same text as the plain one.
set -u
cd "$(dirname "$0")/../.."
BIN=build/mtplx
SRC=models/qwen35-tiny-code
tmp=$(mktemp -d /tmp/mtplx_progress_sh.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
export MTPLX_PROGRESS_INTERVAL=0

head -c 4000 "$SRC/val_code.txt" >"$tmp/long.txt" # about 1100 tokens: three 512-token prefill forwards
gen=(--prompt-file "$tmp/long.txt" --max-tokens 6 --temperature 0 --seed 1)
MTPLX_PROGRESS_DELAY=0 "$BIN" run "${gen[@]}" >"$tmp/text.txt" 2>"$tmp/err.txt" || bad "run: $(cat "$tmp/err.txt")"
grep -q "^load: done, 6/6 layers in" "$tmp/err.txt" || bad "no load progress: $(cat "$tmp/err.txt")"
grep -q "^prefill: 512/[0-9]* tok" "$tmp/err.txt" || bad "no intermediate prefill line: $(cat "$tmp/err.txt")"
n=$(grep -o "^prefill: done, [0-9]*/[0-9]* tok" "$tmp/err.txt" | grep -o "[0-9]*/[0-9]*")
[ -n "$n" ] && [ "${n%/*}" = "${n#*/}" ] && [ "${n%/*}" -gt 1024 ] || bad "prefill final line: '$n'"
# the same generation without progress (one prefill forward) gives the same text
MTPLX_PROGRESS_DELAY=0 "$BIN" run "${gen[@]}" --json >"$tmp/out.json" 2>"$tmp/err2.txt" || bad "run --json"
[ -s "$tmp/err2.txt" ] && bad "--json printed progress: $(cat "$tmp/err2.txt")"
# (text alone would not see a wrong MTP history: at temperature 0 the drafts only move acceptance)
node -e '
    const fs = require("fs");
    const j = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
    const t = fs.readFileSync(process.argv[2], "utf8");
    const acc = /acceptance ([0-9.]+)/.exec(fs.readFileSync(process.argv[3], "utf8"));
    if (j.text + "\n" !== t) { console.log("chunked prefill text " + JSON.stringify(t) + " != " + JSON.stringify(j.text)); process.exit(1); }
    if (!acc || acc[1] !== j.stats.acceptance_rate.toFixed(3)) { console.log("acceptance " + (acc && acc[1]) + " != " + j.stats.acceptance_rate); process.exit(1); }
' "$tmp/out.json" "$tmp/text.txt" "$tmp/err.txt" || bad "chunked prefill changed the output"
MTPLX_PROGRESS_DELAY=0 "$BIN" run "${gen[@]}" --quiet >/dev/null 2>"$tmp/err.txt"
grep -qE "^(load|prefill):" "$tmp/err.txt" && bad "--quiet printed progress"
"$BIN" run --prompt 'def f(x):' --max-tokens 2 >/dev/null 2>"$tmp/err.txt"
grep -qE "^(load|prefill):" "$tmp/err.txt" && bad "quick work printed progress: $(cat "$tmp/err.txt")"

MTPLX_PROGRESS_DELAY=0 "$BIN" convert --q-bits 8 --out "$tmp/q8" >/dev/null 2>"$tmp/err.txt" || bad "convert: $(cat "$tmp/err.txt")"
grep -qE "^convert: done, ([0-9]+)/[0-9]+ tensors in" "$tmp/err.txt" || bad "no convert progress: $(cat "$tmp/err.txt")"
MTPLX_PROGRESS_DELAY=0 "$BIN" convert --q-bits 8 --out "$tmp/q8b" --json >/dev/null 2>"$tmp/err.txt" || bad "convert --json"
[ -s "$tmp/err.txt" ] && bad "convert --json printed progress"

MTPLX_PROGRESS_DELAY=0 "$BIN" synth --config "$SRC/config.json" --out "$tmp/syn" >/dev/null 2>"$tmp/err.txt" || bad "synth: $(cat "$tmp/err.txt")"
shards=$(ls "$tmp/syn"/model-*.safetensors | wc -l)
grep -q "^synth: done, $shards/$shards shards in" "$tmp/err.txt" || bad "no synth progress ($shards shards): $(cat "$tmp/err.txt")"
MTPLX_PROGRESS_DELAY=0 "$BIN" synth --config "$SRC/config.json" --out "$tmp/syn2" --quiet >/dev/null 2>"$tmp/err.txt"
[ -s "$tmp/err.txt" ] && bad "synth --quiet printed progress"

[ $fail = 0 ] && echo "progress.sh: all checks passed"
exit $fail
