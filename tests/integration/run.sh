#!/usr/bin/env bash
# run.sh — `mtplx run`, `tune` and `bench` end to end on the embedded model: greedy output equals the
# HF golden continuation at depths 0, 1 and 3; --samples seeds S..S+N-1 reproduce single runs, also
# with --parallel (continuous batching, under the sanitizer build); text
# prompts; JSON shape; tune saves a depth that run then uses; bench --json; error exits and messages
# (on the sanitizer build).
set -euo pipefail
cd "$(dirname "$0")/../.."
M=build/mtplx
MA=build/asan/mtplx
[ -x "$MA" ] || MA=$M
G=models/qwen35-tiny-code/golden.safetensors
CMP=tests/integration/logits_compare.js
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export MTPLX_HOME=$tmp/home
js() { node -e "const L=require('fs').readFileSync(process.argv[1],'utf8').trim().split('\n').map(JSON.parse);$1" "$2"; }

# 1. greedy == the HF golden continuation (40 tokens), AR and MTP
ids=$(node "$CMP" ids "$G")
plen=$(node "$CMP" prompt_len "$G")
prompt=$(echo "$ids" | cut -d, -f1-"$plen")
want=$(echo "$ids" | cut -d, -f$((plen + 1))-)
for d in 0 1 3; do
    "$M" run --prompt-tokens "$prompt" --max-tokens 40 --temperature 0 --depth "$d" --json >"$tmp/g$d"
    got=$(js 'console.log(L[0].tokens.join(","))' "$tmp/g$d")
    [ "$got" = "$want" ] || fail "depth $d greedy: $got != golden $want"
    js 'const s=L[0].stats; if (s.depth!=='"$d"'||s.completion_tokens!==40||L[0].finish_reason!=="length"
        ||s.accepted_per_position.length!=='"$d"'||typeof L[0].text!=="string") process.exit(1)' "$tmp/g$d" \
        || fail "depth $d: JSON fields"
done
echo "greedy depths 0,1,3 == golden"

# 2. --samples N: seeds S..S+N-1, each identical to a single run with that seed
"$M" run --prompt-tokens "$prompt" --max-tokens 6 --temperature 0.8 --top-k 30 --depth 2 --samples 3 --seed 41 \
    --json >"$tmp/s"
js 'if (L.length!==3||L.map(x=>x.seed).join()!=="41,42,43") process.exit(1)' "$tmp/s" || fail "--samples seeds"
"$M" run --prompt-tokens "$prompt" --max-tokens 6 --temperature 0.8 --top-k 30 --depth 2 --seed 42 --json >"$tmp/s1"
a=$(js 'console.log(L[1].tokens.join(","))' "$tmp/s")
b=$(js 'console.log(L[0].tokens.join(","))' "$tmp/s1")
[ "$a" = "$b" ] || fail "sample 2 of --samples ($a) differs from --seed 42 ($b)"
echo "--samples reproduces single runs"

# 2b. --samples N --parallel (continuous batching, at most 3 at once): the same tokens, in seed order
"$M" run --prompt-tokens "$prompt" --max-tokens 24 --temperature 0.8 --top-k 30 --depth 2 --samples 7 --seed 41 \
    --json >"$tmp/sq"
"$MA" run --prompt-tokens "$prompt" --max-tokens 24 --temperature 0.8 --top-k 30 --depth 2 --samples 7 --seed 41 \
    --parallel --max-seqs 3 --json >"$tmp/sp" 2>"$tmp/sp.err"
a=$(js 'console.log(L.map(x=>x.seed+":"+x.tokens.join(",")).join(";"))' "$tmp/sq")
b=$(js 'console.log(L.map(x=>x.seed+":"+x.tokens.join(",")).join(";"))' "$tmp/sp")
[ "$a" = "$b" ] || fail "--parallel samples differ from sequential ones: $b vs $a"
grep -q "7 samples at most 3 at once" "$tmp/sp.err" || fail "--parallel aggregate line: $(cat "$tmp/sp.err")"
echo "--samples --parallel reproduces sequential samples"

# 2b. a flag the user typed always wins, even when it equals the built-in default (T 1, top-p 1,
# top-k 0) that the model's generation_config (T 0.6, top-p 0.95, top-k 20) would otherwise replace
r() { "$M" run --prompt-tokens "$prompt" --max-tokens 48 --depth 0 --seed 7 --json "$@" | js 'console.log(L[0].tokens.join(","))' /dev/stdin; }
model_default=$(r)
explicit_model=$(r --temperature 0.6 --top-p 0.95 --top-k 20)
[ "$model_default" = "$explicit_model" ] || fail "the model's own values typed as flags changed the tokens"
for f in "--temperature 1.0" "--top-p 1" "--top-k 0"; do
    # shellcheck disable=SC2086
    [ "$(r $f)" != "$model_default" ] || fail "$f was ignored (same tokens as the model's defaults)"
done
echo "flags equal to the built-in defaults are honoured"

# 3. text prompt, plain output: text on stdout, a stats line on stderr
"$M" run --prompt $'def add(a, b):\n' --max-tokens 12 --temperature 0 --depth 2 >"$tmp/o" 2>"$tmp/e"
[ -s "$tmp/o" ] || fail "no text on stdout"
grep -q "decode" "$tmp/e" && grep -q "seed" "$tmp/e" || fail "no stats line on stderr"
"$M" run --help | grep -q -- "--prompt-tokens" || fail "--help"
# --chat renders the prompt as a user message with the model's chat template (more tokens than the text)
"$M" run --chat --prompt "hi" --max-tokens 4 --temperature 0 --depth 1 --json >"$tmp/c"
js 'if (!(L[0].stats.prompt_tokens>5)) process.exit(1)' "$tmp/c" || fail "--chat did not render a template"

# 4. tune saves a depth (and an adaptive threshold when one wins) for this model, machine and device;
#    run uses both as its defaults, and a --draft-min-conf typed wins over the saved one
"$M" tune --max-depth 2 --adaptive 3@0.5 --prompts 1 --prompt-len 16 --max-tokens 12 --repeats 1 --json >"$tmp/t"
saved=$(node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));
  if (j.device!=="cpu"||!j.results["3@0.5"]||!(j.results["2"].median_decode_tok_s>0)) process.exit(1);
  console.log(j.depth+"/"+j.draft_min_conf)' "$tmp/t") || fail "tune --json: $(cat "$tmp/t")"
[ -f "$MTPLX_HOME/tuning.json" ] || fail "tune wrote no $MTPLX_HOME/tuning.json"
node -e 'const e=Object.values(JSON.parse(require("fs").readFileSync(process.argv[1])).entries);
  if (e.length!==1||e[0].device!=="cpu"||e[0].decode_tok_s["3@0.5"]===undefined) process.exit(1)' \
    "$MTPLX_HOME/tuning.json" || fail "tuning.json: $(cat "$MTPLX_HOME/tuning.json")"
"$M" run --prompt-tokens "$prompt" --max-tokens 4 --temperature 0 --json >"$tmp/r"
used=$(js 'console.log(L[0].stats.depth+"/"+Math.round(L[0].stats.draft_min_conf*1e4)/1e4)' "$tmp/r")
[ "$used" = "$saved" ] || fail "run used depth/min conf $used, tune saved $saved"
# an adaptive choice saved (the timing above may pick either): run takes its depth and threshold
node -e 'const f=process.argv[1],j=JSON.parse(require("fs").readFileSync(f));
  for (const e of Object.values(j.entries)) e.depth=3, e.draft_min_conf=0.5;
  require("fs").writeFileSync(f, JSON.stringify(j))' "$MTPLX_HOME/tuning.json"
"$M" run --prompt-tokens "$prompt" --max-tokens 4 --temperature 0 --json >"$tmp/r"
js 'const s=L[0].stats; if (s.depth!==3||Math.abs(s.draft_min_conf-0.5)>1e-6) process.exit(1)' "$tmp/r" ||
    fail "run did not take the saved adaptive depth 3@0.5: $(cat "$tmp/r")"
"$M" run --prompt-tokens "$prompt" --max-tokens 4 --temperature 0 --draft-min-conf 0.25 --json >"$tmp/r"
js 'if (Math.abs(L[0].stats.draft_min_conf-0.25)>1e-6) process.exit(1)' "$tmp/r" || fail "--draft-min-conf lost to the tuned one"
# the default adaptive entries give way to --max-depth 8 (with a note); a typed list that does not fit is refused
"$M" tune --max-depth 8 --prompts 1 --prompt-len 16 --max-tokens 4 --repeats 1 --json >/dev/null 2>"$tmp/err" ||
    fail "tune --max-depth 8: $(cat "$tmp/err")"
grep -q "left out the adaptive ones" "$tmp/err" || fail "tune --max-depth 8: no note, $(cat "$tmp/err")"
rc=0; "$M" tune --max-depth 8 --adaptive 6@0.4 >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q "at most" "$tmp/err" || fail "tune --max-depth 8 --adaptive 6@0.4: exit $rc, $(cat "$tmp/err")"
rc=0; "$M" tune --adaptive 3@1 >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q "D@X" "$tmp/err" || fail "tune --adaptive 3@1: exit $rc, $(cat "$tmp/err")"
echo "tune saved depth/min conf $saved; run uses it"

# 5. bench --json: every depth reported with the ratio to AR, acceptance per position, machine facts
#    (the CPU, the kernel path, threads, commit)
"$M" bench --depths 0,1,2 --prompts 2 --prompt-len 16 --max-tokens 12 --repeats 1 --json >"$tmp/b"
node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));
  if (j.results.length!==3||j.results[0].ratio_to_ar!==1||j.results[2].acceptance_per_position.length!==2
      ||!j.machine.cpu||!j.machine.kernel||!(j.machine.threads>0)||!j.machine.commit||!(j.results[1].median_decode_tok_s>0)) process.exit(1)' \
    "$tmp/b" || fail "bench --json"
echo "bench --json ok"
# a D@X entry runs that depth with adaptive depth X, side by side with the fixed ones
"$M" bench --depths 0,2,3@0.5 --prompts 1 --prompt-len 16 --max-tokens 12 --repeats 1 --json >"$tmp/b2"
node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1])).results;
  if (r.length!==3||r[1].draft_min_conf!==0||r[2].depth!==3||Math.abs(r[2].draft_min_conf-0.5)>1e-6) process.exit(1)' \
    "$tmp/b2" || fail "bench --depths 0,2,3@0.5"
rc=0; "$M" bench --depths 0,3@1 --prompts 1 >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q "@X" "$tmp/err" || fail "--depths 0,3@1: exit $rc, $(cat "$tmp/err")"
# the text bench / tune prompts are cut from: a checkpoint without val_code.txt (any real one) takes the
# embedded model's code sample and says so; --prompts-file another text (an empty one fails: it is read);
# a missing file fails naming it
mkdir -p "$tmp/noval"
for f in models/qwen35-tiny-code/*; do [ "${f##*/}" = val_code.txt ] || ln -s "$PWD/$f" "$tmp/noval/"; done
B="--depths 0,1 --prompts 1 --prompt-len 16 --max-tokens 8 --repeats 1 --json"
"$M" bench --model "$tmp/noval" $B >"$tmp/nv" 2>"$tmp/err" || fail "bench without val_code.txt: $(cat "$tmp/err")"
grep -q "has no val_code.txt: prompts are cut from the embedded model's code sample" "$tmp/err" ||
    fail "bench without val_code.txt did not say where its prompts came from: $(cat "$tmp/err")"
node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));
  if (!j.settings.prompts_file.endsWith("/models/qwen35-tiny-code/val_code.txt")
      ||j.results.length!==2) process.exit(1)' "$tmp/nv" || fail "bench without val_code.txt: $(cat "$tmp/nv")"
printf 'def add(a, b):\n    """Sum of a and b."""\n    return a + b\n' >"$tmp/p.txt"
"$M" bench --model "$tmp/noval" --prompts-file "$tmp/p.txt" $B >"$tmp/pf" 2>"$tmp/err" ||
    fail "--prompts-file: $(cat "$tmp/err")"
! grep -q "val_code" "$tmp/err" || fail "--prompts-file still took val_code.txt: $(cat "$tmp/err")"
node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));
  if (j.settings.prompts_file!==process.argv[2]) process.exit(1)' "$tmp/pf" "$tmp/p.txt" ||
    fail "--prompts-file: $(cat "$tmp/pf")"
: >"$tmp/empty.txt"
rc=0; "$M" bench --prompts-file "$tmp/empty.txt" $B >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] && grep -q "empty.txt: prompt 0 is empty" "$tmp/err" ||
    fail "--prompts-file empty: exit $rc, $(cat "$tmp/err")"
rc=0; "$M" tune --prompts-file "$tmp/none.txt" --max-depth 1 >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] && grep -q -- "--prompts-file $tmp/none.txt: no such file" "$tmp/err" ||
    fail "tune --prompts-file missing: exit $rc, $(cat "$tmp/err")"
"$M" tune --model "$tmp/noval" --max-depth 1 --adaptive none --prompts 1 --prompt-len 16 --max-tokens 4 --repeats 1 \
    --json >/dev/null 2>"$tmp/err" || fail "tune without val_code.txt: $(cat "$tmp/err")"
echo "bench / tune prompt texts ok"
# bench --draft-cost (sanitizer build): one line per draft format, every part timed
"$MA" bench --draft-cost --draft-quants none,q4/nopack,q4 --steps 5 --chain 2 --context 8 --json >"$tmp/dc"
node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1])).draft_cost_ms;
  for (const f of ["none","q4/nopack","q4"]) if (!j[f]||!(j[f].layer>0)||!(j[f].head>0)||!(j[f].step>0)) process.exit(1)' \
    "$tmp/dc" || fail "bench --draft-cost --json"
echo "bench --draft-cost ok"
# bench --verify-cost --logits-top (sanitizer build): 1..3-row forwards asking each row's 20 best logits,
# as a top_k = 20 verify does, reported; out of range or without --verify-cost: a usage error
"$MA" bench --verify-cost --rows 3 --reps 1 --context 8 --logits-top 20 --json >"$tmp/vt"
node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));
  if (j.logits_top!==20||![1,2,3].every(r=>j.forward_ms[r]>0)) process.exit(1)' "$tmp/vt" ||
    fail "bench --verify-cost --logits-top 20 --json"
rc=0; "$M" bench --verify-cost --logits-top 65 >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q "logits-top" "$tmp/err" || fail "--logits-top 65: exit $rc, $(cat "$tmp/err")"
echo "bench --verify-cost --logits-top ok"
# bench --draft-accept (sanitizer build): one acceptance in (0, 1] per format and draft position;
# a malformed --draft-quant group size is a usage error
"$MA" bench --draft-accept --draft-quants none,q4:128 --depth 2 --prompts 1 --prompt-len 16 --generate 8 --json >"$tmp/da"
node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));
  if (!(j.positions>0)) process.exit(1);
  for (const f of ["none","q4:128"]) { const a=j.acceptance[f];
    if (!a||a.length!==2||!a.every(x=>x>0&&x<=1+1e-9)) process.exit(1) }' "$tmp/da" || fail "bench --draft-accept --json"
rc=0; "$M" bench --draft-cost --draft-quants q4:7 --steps 1 >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q "group" "$tmp/err" || fail "--draft-quant q4:7: exit $rc, $(cat "$tmp/err")"
echo "bench --draft-accept ok"
# --draft-vocab (sanitizer build): greedy MTP over a 64-id draft vocabulary still equals the golden
# (nearly every draft rejected, the residual emits the rest); in bench, q4@64 accepts less than q4;
# a malformed value is a usage error
"$MA" run --prompt-tokens "$prompt" --max-tokens 40 --temperature 0 --depth 3 --draft-vocab 64 --json >"$tmp/gv"
got=$(js 'console.log(L[0].tokens.join(","))' "$tmp/gv")
[ "$got" = "$want" ] || fail "--draft-vocab 64 greedy: $got != golden $want"
"$MA" bench --draft-accept --draft-quants q4,q4@64 --depth 1 --prompts 1 --prompt-len 32 --json >"$tmp/dv"
node -e 'const a=JSON.parse(require("fs").readFileSync(process.argv[1])).acceptance;
  if (!(a["q4@64"][0]>=0&&a["q4@64"][0]<a.q4[0])) process.exit(1)' "$tmp/dv" || fail "bench --draft-quants q4@64"
rc=0; "$M" run --prompt-tokens 1,2 --max-tokens 2 --draft-vocab 12x >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q -- "--draft-vocab" "$tmp/err" || fail "--draft-vocab 12x: exit $rc, $(cat "$tmp/err")"
echo "--draft-vocab ok"
# the MTP families with hidden 48 (not a multiple of the default q4 group 64) still run by default,
# drafting at full precision with a note; asking for q4 explicitly stays an error
for d in tests/data/goldens-extra/qwen3_next_b tests/data/goldens-extra/qwen3_5_moe_b tests/data/goldens-extra/deepseek_v3_mtp; do
    "$MA" run --model "$d" --prompt-tokens 5,17,99 --max-tokens 12 --depth 3 --seed 3 --json >"$tmp/fam" 2>"$tmp/err" \
        || fail "run --model $d (default draft quantization): $(cat "$tmp/err")"
    js 'if (L[0].tokens.length!==12||!(L[0].stats.drafted>0)) process.exit(1)' "$tmp/fam" || fail "run --model $d: $(cat "$tmp/fam")"
done
rc=0; "$M" run --model tests/data/goldens-extra/qwen3_next_b --prompt-tokens 5,17 --max-tokens 2 --draft-quant q4 \
    >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] && grep -q "group size 64" "$tmp/err" || fail "explicit --draft-quant q4 on hidden 48: exit $rc"
echo "run on MTP family goldens ok"
# bench --matmul (sanitizer build): a time per T for each format; bad format / shape are usage errors
for f in q4 q8 bf16; do
    "$MA" bench --matmul $f --shape 64x128 --count 2 --rows 3 --reps 1 --json >"$tmp/mm" || fail "bench --matmul $f"
    node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));
      if (j.format!==process.argv[2]||j.count!==2||!(j.bytes>0)) process.exit(1);
      for (const t of ["1","2","3"]) if (!(j.ms[t]>0)||!(j.ratio[t]>0)) process.exit(1)' "$tmp/mm" $f ||
        fail "bench --matmul $f --json: $(cat "$tmp/mm")"
done
"$MA" bench --matmul q4 --shape 64x128 --count 1 --rows 40 --reps 1 --json >"$tmp/mm" || fail "bench --matmul --rows 40"
node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1])); if (!(j.ms["40"]>0)) process.exit(1)' "$tmp/mm" ||
    fail "bench --matmul --rows 40 (many-row calls, up to 256): $(cat "$tmp/mm")"
# --group-size: the weights' groups (bytes per pass: 4 bits + a 16-bit scale and bias per group)
for gb in 32:10240 128:8704; do
    "$MA" bench --matmul q4 --group-size ${gb%%:*} --shape 64x128 --count 2 --rows 2 --reps 1 --json >"$tmp/mm" ||
        fail "bench --matmul q4 --group-size ${gb%%:*}"
    node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));
      if (j.group_size!==+process.argv[2]||j.bytes!==+process.argv[3]||!(j.ms["2"]>0)) process.exit(1)' \
        "$tmp/mm" ${gb%%:*} ${gb##*:} || fail "bench --matmul q4 --group-size ${gb%%:*}: $(cat "$tmp/mm")"
done
for bad in "--matmul q5" "--matmul q4 --shape 64x100" "--matmul q4 --shape 64" "--matmul q4 --rows 257" \
    "--matmul q4 --group-size 48" "--matmul q8 --group-size 128 --shape 64x192"; do
    rc=0; "$MA" bench $bad >/dev/null 2>"$tmp/err" || rc=$?
    [ "$rc" = 2 ] && grep -q "matmul\|shape\|group" "$tmp/err" || fail "bench $bad: exit $rc, $(cat "$tmp/err")"
done
echo "bench --matmul ok"

# 6. errors: exit 2 with a message naming the problem (sanitizer build), exit 1 for a bad model
expect() { # code pattern args...
    local code=$1 pat=$2 rc=0
    shift 2
    "$MA" run "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" = "$code" ] || fail "run $*: exit $rc, expected $code ($(cat "$tmp/err"))"
    grep -q -- "$pat" "$tmp/err" || fail "run $*: message '$(cat "$tmp/err")' lacks '$pat'"
}
expect 2 temperature --prompt-tokens 1,2 --temperature -1
expect 2 top_p --prompt-tokens 1,2 --top-p 1.5
expect 2 min_p --prompt-tokens 1,2 --min-p 1
expect 2 repetition_penalty --prompt-tokens 1,2 --repetition-penalty 0
expect 2 presence_penalty --prompt-tokens 1,2 --presence-penalty 3
expect 2 --depth --prompt-tokens 1,2 --depth 99
expect 2 --max-tokens --prompt-tokens 1,2 --max-tokens 0
expect 2 "exactly one" --max-tokens 3
expect 2 "--prompt-tokens" --prompt-tokens 1,x,3
expect 2 "vocabulary" --prompt-tokens 1,99999 --max-tokens 2
expect 2 "unknown" --prompt-tokens 1 --bogus
expect 1 "nowhere" --model "$tmp/nowhere" --prompt-tokens 1,2
mkdir -p "$tmp/notok" && cp models/qwen35-tiny-code/*.json models/qwen35-tiny-code/*.safetensors "$tmp/notok/" \
    && rm "$tmp/notok/tokenizer.json" "$tmp/notok/tokenizer_config.json"
expect 1 "need the tokenizer" --model "$tmp/notok" --prompt "hello"
# a clone whose packed shards were never unpacked names the fix (the embedded model ships as .xz)
mkdir -p "$tmp/packed" && cp models/qwen35-tiny-code/*.json models/qwen35-tiny-code/*.xz "$tmp/packed/"
expect 1 "make model" --model "$tmp/packed" --prompt-tokens 1,2 --max-tokens 1
echo "error cases ok"
