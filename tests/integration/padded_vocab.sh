#!/usr/bin/env bash
# padded_vocab.sh — a model whose vocabulary is larger than its tokenizer (real checkpoints pad their
# embedding: Qwen3.5 has 248,320 rows for 248,077 ids) may sample a padding id. Those ids decode to no
# text (docs/tokenizer.md, "Ids past the tokenizer"): `run` (--json and streamed text), `serve`
# (streamed and whole) and structured output all finish normally. The model is the embedded one's
# shape with vocab 12,288 (4,096 padding ids) and random untied weights, so at temperature 1 about a
# third of the sampled ids are padding ids; the sanitizer build runs it when present.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
it_init
M=build/asan/mtplx
[ -x "$M" ] || M=build/mtplx
SRC=models/qwen35-tiny-code
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }

node -e '
const fs = require("fs"), c = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
const tc = c.text_config || c; tc.vocab_size = 12288; tc.tie_word_embeddings = c.tie_word_embeddings = false;
fs.writeFileSync(process.argv[2], JSON.stringify(c));' "$SRC/config.json" "$tmp/config.json"
build/mtplx synth --config "$tmp/config.json" --out "$tmp/m" --quiet >/dev/null || { echo "FAIL: synth"; exit 1; }
cp "$SRC"/tokenizer.json "$SRC"/tokenizer_config.json "$tmp/m/"
[ -f "$SRC/chat_template.jinja" ] && cp "$SRC/chat_template.jinja" "$tmp/m/"

# 1. run: --json and the streamed text agree, and some sampled ids are padding ids
args=(--model "$tmp/m" --prompt "def f(x):" --max-tokens 48 --temperature 1 --top-k 0 --top-p 1 --seed 7 --depth 3)
"$M" run "${args[@]}" --json >"$tmp/run.json" 2>"$tmp/run.err" || bad "run --json: $(cat "$tmp/run.err")"
"$M" run "${args[@]}" >"$tmp/run.txt" 2>"$tmp/run2.err" || bad "run (streamed): $(cat "$tmp/run2.err")"
"$M" run "${args[@]}" --depth 0 --json >"$tmp/run0.json" 2>"$tmp/run0.err" || bad "run --depth 0: $(cat "$tmp/run0.err")"
node -e '
const fs = require("fs"), j = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
const txt = fs.readFileSync(process.argv[2], "utf8");
const pads = j.tokens.filter(t => t >= 8192).length;
if (j.tokens.length !== 48 || pads < 1) { console.error("tokens", j.tokens.length, "padding ids", pads); process.exit(1); }
if (!txt.includes(j.text)) { console.error("streamed text lacks the JSON text", JSON.stringify(j.text)); process.exit(1); }
const j0 = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
if (j0.tokens.filter(t => t >= 8192).length < 1) { console.error("depth 0: no padding id"); process.exit(1); }
console.log("run: 48 tokens, " + pads + " padding ids, streamed text = JSON text");' "$tmp/run.json" "$tmp/run.txt" "$tmp/run0.json" \
    || bad "run output"

# 2. structured output: the token mask covers the model's vocabulary; padding ids (no bytes) are never
#    allowed (a mask sized by the tokenizer was read past its end: ASan caught it)
"$M" run --model "$tmp/m" --prompt "def f(x):" --max-tokens 40 --temperature 1 --seed 7 --depth 3 --grammar json \
    --json >"$tmp/g.json" 2>"$tmp/g.err" || bad "run --grammar json: $(cat "$tmp/g.err")"
node -e '
const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
if (!j.tokens.length || j.tokens.some(t => t >= 8192)) { console.error("grammar tokens", j.tokens); process.exit(1); }
console.log("run --grammar json: " + j.tokens.length + " tokens, no padding id");' "$tmp/g.json" || bad "grammar output"

# 3. serve: a streamed and a whole completion, then structured output (its token mask covers the
#    model's vocabulary, padding ids masked off)
if serve_start "$M" s --model "$tmp/m" --cache-ram 0; then
    node - "$port" "$tmp/run0.json" <<'JS' || bad "serve"
const port = process.argv[2], ran = JSON.parse(require("fs").readFileSync(process.argv[3], "utf8"));
const post = async (body) => {
  const r = await fetch(`http://127.0.0.1:${port}/v1/completions`, {method: "POST",
    headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  return [r.status, await r.text()];
};
(async () => {
  const base = {model: "m", prompt: "def f(x):", max_tokens: 48, temperature: 1, top_k: 0, top_p: 1, seed: 7, mtplx: {depth: 3}}; // a pinned depth: reproducible with its seed
  let [st, txt] = await post(base);
  if (st !== 200) throw new Error(`whole: HTTP ${st} ${txt}`);
  const j = JSON.parse(txt);
  if (j.choices[0].finish_reason !== "length" || j.usage.completion_tokens !== 48) throw new Error(`whole: ${txt}`);
  /* AR steps with run's seed and sampler draw run's tokens (padding ids among them); with drafts, the
   * server's scheduler may draft from other q lists (same output law, other draws) */
  const [st0, txt0] = await post({...base, mtplx: {depth: 0}});
  const j0 = JSON.parse(txt0);
  if (st0 !== 200 || j0.choices[0].text !== ran.text) throw new Error(`serve depth 0 ${txt0} != run ${JSON.stringify(ran.text)}`);
  [st, txt] = await post({...base, stream: true});
  if (st !== 200 || !txt.includes("data: [DONE]") || txt.includes('"error"')) throw new Error(`stream: HTTP ${st} ${txt.slice(-300)}`);
  const streamed = txt.split("\n").filter(l => l.startsWith("data: {")).map(l => JSON.parse(l.slice(6)))
    .map(e => e.choices && e.choices[0] ? e.choices[0].text || "" : "").join("");
  if (streamed !== j.choices[0].text) throw new Error(`streamed ${JSON.stringify(streamed)} != whole ${JSON.stringify(j.choices[0].text)}`);
  [st, txt] = await post({...base, max_tokens: 64, response_format: {type: "json_object"}, temperature: 1});
  if (st !== 200) throw new Error(`json_object: HTTP ${st} ${txt}`);
  console.log("serve: whole = streamed text at depth 3, depth 0 = run's text (padding ids among its tokens); json_object 200");
})().catch(e => { console.error(e.message); process.exit(1); });
JS
    serve_stop "$pid" s || bad "serve stop"
    sanitizer_clean "$tmp/s.err" || bad "serve: sanitizer report"
else
    bad "serve did not start"
fi
[ $fail = 0 ] && echo "padded_vocab.sh: all checks passed"
exit $fail
