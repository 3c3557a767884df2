#!/usr/bin/env bash
# logits.sh — `mtplx logits` against HF fp32 goldens, one prefill forward and stepwise decode, with
# the MTP head; then error cases (bad model dir, bad ids, usage) on the sanitizer build.
set -euo pipefail
cd "$(dirname "$0")/../.."
M=build/mtplx
MA=build/asan/mtplx
[ -x "$MA" ] || MA=$M
CMP=tests/integration/logits_compare.js
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for dir in tests/data/goldens/qwen3_5_dense tests/data/goldens-extra/qwen3_5_dense_b \
    tests/data/goldens-extra/qwen3_5_dense_c models/qwen35-tiny-code; do
    ids=$(node "$CMP" ids "$dir/golden.safetensors")
    for mode in prefill step; do
        flag=""
        [ "$mode" = step ] && flag=--step
        rc=0
        "$M" logits --model "$dir" --tokens "$ids" --mtp $flag --out "$tmp/out.safetensors" >"$tmp/stdout" || rc=$?
        [ "$rc" = 0 ] || fail "$dir $mode: exit $rc"
        grep -q "wrote $tmp/out.safetensors" "$tmp/stdout" || fail "$dir $mode: no 'wrote' line"
        echo "$dir ($mode):"
        node "$CMP" compare "$tmp/out.safetensors" "$dir/golden.safetensors" 1e-3 || fail "$dir $mode: differs from golden"
    done
done

# --json summary is valid JSON, and --step gives the same argmax as the prefill
"$M" logits --model tests/data/goldens/qwen3_5_dense --tokens 3,1,4,1,5 --mtp --json >"$tmp/j"
node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));
  if (j.tokens !== 5 || j.argmax.length !== 5 || j.mtp_argmax.length !== 4) process.exit(1);' "$tmp/j" \
    || fail "--json output"
want=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).argmax.join(" "))' "$tmp/j")
"$M" logits --model tests/data/goldens/qwen3_5_dense --tokens 3,1,4,1,5 --step | grep -qx "argmax: $want" \
    || fail "--step argmax differs from prefill argmax"

# the prefill chunk (MTPLX_PREFILL_ROWS: 512 rows by default on the CPU, here 48 and 4096) never
# changes a bit: a 700-token prefill with the MTP head, logits and hidden of every row
long=$(seq 1 700 | awk '{ if (NR > 1) printf ","; printf "%d", ($1 * 7919 + 13) % 8000 }')
for rows in 512 48 4096; do
    MTPLX_PREFILL_ROWS=$rows "$M" logits --tokens "$long" --mtp --out "$tmp/chunk$rows.safetensors" >/dev/null \
        || fail "MTPLX_PREFILL_ROWS=$rows logits"
done
cmp -s "$tmp/chunk512.safetensors" "$tmp/chunk48.safetensors" || fail "48-row prefill chunks change the logits"
cmp -s "$tmp/chunk512.safetensors" "$tmp/chunk4096.safetensors" || fail "one 700-row chunk changes the logits"

# --text: the embedded model's golden prompt tokenizes to the golden's prompt ids, and the last row's
# argmax is the golden's first continuation token
prompt=$'import os\nimport sys\n\n\ndef main(argv):\n'
"$M" logits --text "$prompt" --json >"$tmp/t"
node -e 'const fs=require("fs"); const j=JSON.parse(fs.readFileSync(process.argv[1]));
  const ids=process.argv[2].split(",").map(Number), P=Number(process.argv[3]);
  const want=ids.slice(0,P);
  if (JSON.stringify(j.ids)!==JSON.stringify(want)) { console.error("ids", j.ids, "expected", want); process.exit(1); }
  if (j.argmax[P-1]!==ids[P]) { console.error("argmax", j.argmax[P-1], "expected", ids[P]); process.exit(1); }' \
    "$tmp/t" "$(node "$CMP" ids models/qwen35-tiny-code/golden.safetensors)" \
    "$(node "$CMP" prompt_len models/qwen35-tiny-code/golden.safetensors)" || fail "--text on the golden prompt"

# error cases: the right exit status and a message naming the problem, never a crash
expect() { # want_rc pattern cmd...
    local want=$1 pat=$2 rc=0
    shift 2
    "$@" >"$tmp/o" 2>"$tmp/e" || rc=$?
    [ "$rc" = "$want" ] || fail "$* -> exit $rc, expected $want ($(cat "$tmp/e"))"
    grep -q -- "$pat" "$tmp/e" || fail "$* -> message '$(cat "$tmp/e")' lacks '$pat'"
}
expect 1 "$tmp/none" "$MA" logits --model "$tmp/none" --tokens 1,2
mkdir -p "$tmp/empty" && echo '{}' >"$tmp/empty/config.json"
expect 1 "model_type" "$MA" logits --model "$tmp/empty" --tokens 1
mkdir -p "$tmp/trunc"
cp tests/data/goldens/qwen3_5_dense/config.json "$tmp/trunc/"
head -c 5000 tests/data/goldens/qwen3_5_dense/model.safetensors >"$tmp/trunc/model.safetensors"
expect 1 "model.safetensors" "$MA" logits --model "$tmp/trunc" --tokens 1
expect 1 "vocabulary" "$MA" logits --model tests/data/goldens/qwen3_5_dense --tokens 1,256
expect 2 "not a comma-separated" "$MA" logits --model tests/data/goldens/qwen3_5_dense --tokens 1,-2
expect 2 "exactly one of" "$MA" logits --model tests/data/goldens/qwen3_5_dense
expect 2 "at least 2 tokens" "$MA" logits --model tests/data/goldens/qwen3_5_dense --tokens 7 --mtp
expect 2 "unknown option" "$MA" logits --bogus
expect 1 "tokenizer.json" "$MA" logits --model tests/data/goldens/qwen3_5_dense --text hello
expect 2 "no tokens" "$MA" logits --text ""
expect 2 "missing value" "$MA" logits --tokens
"$M" logits --help | grep -q -- "--step" || fail "--help"
echo "logits.sh: ok"
