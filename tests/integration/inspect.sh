#!/usr/bin/env bash
# inspect.sh — `mtplx inspect` end to end: the embedded model, every golden, a directory that is not a
# model, a made-up unsupported architecture, a malformed config, usage errors. Checks the tier, the
# reason and the documented exit status (docs/cli.md), text and --json output. Runs the ASan build
# of the CLI when it exists (error paths under the sanitizers).
set -u
cd "$(dirname "$0")/../.."
BIN=build/mtplx
[ -x build/asan/mtplx ] && BIN=build/asan/mtplx
tmp=$(mktemp -d /tmp/mtplx_inspect_sh.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# json_field FILE EXPR: evaluate a JS expression on the parsed JSON object `j`.
json_field() { node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));console.log(eval(process.argv[2]))' "$1" "$2"; }
# json_fields FILE EXPR...: the same for several expressions, one node process (its start-up is most
# of this script's CPU), one line each (JSON-encoded when not a string without line breaks)
json_fields() {
    node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));
      for (const e of process.argv.slice(2)) { const v=eval(e);
        console.log(typeof v === "string" && !/[\r\n]/.test(v) ? v : v === undefined ? "undefined" : JSON.stringify(v)); }' "$@"
}

# expect DIR EXIT TIER [REASON_SUBSTRING]
expect() {
    local dir=$1 want_rc=$2 want_tier=$3 want_reason=${4:-}
    "$BIN" inspect --model "$dir" --json >"$tmp/out.json" 2>"$tmp/err.txt"
    local rc=$?
    [ "$rc" = "$want_rc" ] || bad "$dir: exit $rc, want $want_rc ($(cat "$tmp/err.txt"))"
    local tier reason code f
    f=$(json_fields "$tmp/out.json" 'j.tier' 'j.reason' 'j.exit_code') || { bad "$dir: output is not JSON"; return; }
    { IFS= read -r tier; IFS= read -r reason; IFS= read -r code; } <<<"$f"
    [ "$tier" = "$want_tier" ] || bad "$dir: tier $tier, want $want_tier"
    [ -n "$reason" ] || bad "$dir: empty reason"
    [ -z "$want_reason" ] || grep -qF -- "$want_reason" <<<"$reason" || bad "$dir: reason '$reason' lacks '$want_reason'"
    [ "$code" = "$want_rc" ] || bad "$dir: exit_code field differs from the exit status"
    # the text form exits the same way and names the tier
    "$BIN" inspect --model "$dir" >"$tmp/out.txt" 2>&1
    [ $? = "$want_rc" ] || bad "$dir: text mode exit differs"
    grep -q "^tier *$want_tier: " "$tmp/out.txt" || bad "$dir: text output lacks the tier line"
}

tier_rc() { case $1 in verified) echo 0;; ar-only) echo 10;; unsupported) echo 20;; not-a-model) echo 30;; esac; }

# embedded model: verified, with its README's parameter counts and the MTP head
expect models/qwen35-tiny-code 0 verified "MTP head"
"$BIN" inspect --json >"$tmp/def.json"  # --model defaults to the embedded model
[ "$(json_field "$tmp/def.json" 'j.tier')" = verified ] || bad "default model is not verified"
[ "$(json_field "$tmp/def.json" 'Math.round(j.params/1e5)')" = 200 ] || bad "embedded trunk params not 20.0 M"
[ "$(json_field "$tmp/def.json" 'Math.round(j.params_mtp/1e5)')" = 31 ] || bad "embedded MTP params not 3.1 M"
[ "$(json_field "$tmp/def.json" 'j.mtp.layout')" = "mtp.*" ] || bad "embedded MTP layout"
[ "$(json_field "$tmp/def.json" 'j.dtypes.BF16.bytes')" = 46256256 ] || bad "embedded BF16 bytes != index total_size"
"$BIN" inspect --context 8192 --json >"$tmp/ctx.json"
[ "$(json_field "$tmp/ctx.json" 'j.memory.kv_cache_bytes === 2*j.memory.kv_bytes_per_token*4096')" = true ] ||
    bad "KV cache does not scale with --context"

# every golden: the tier docs/inspect.md's definitions give it, decided by hand (not read from the
# product's family table): every family here runs (docs/families.md); "verified" when the weights
# hold a complete MTP head of a family whose drafter runs, else "ar-only" (Qwen3 and Llama have no
# MTP architecture; the DeepSeek-V3 goldens other than deepseek_v3_mtp declare an MTP layer in
# config.json but carry none of its tensors). Same table as tests/unit/test_inspect.c; a golden
# without a row fails, so a new one gets its tier decided.
declare -A golden_tier=(
    [goldens/qwen3_5_dense]=verified [goldens/qwen3_5_moe]=verified [goldens/qwen3_next]=verified
    [goldens/qwen3_dense]=ar-only [goldens/llama]=ar-only [goldens/deepseek_v3]=ar-only
    [goldens-extra/qwen3_5_dense_b]=verified [goldens-extra/qwen3_5_dense_c]=verified
    [goldens-extra/qwen3_5_moe_b]=verified [goldens-extra/qwen3_next_b]=verified
    [goldens-extra/deepseek_v3_mtp]=verified [goldens-extra/deepseek_v3_b]=ar-only
    [goldens-extra/qwen3_dense_b]=ar-only [goldens-extra/llama_linearrope]=ar-only
    [goldens-extra/llama_llama3rope]=ar-only [goldens-family/qwen3_yarn]=ar-only
    [goldens-family/deepseek_v3_yarn]=ar-only [goldens-family/deepseek_v3_noqlora]=ar-only
)
for d in tests/data/goldens/*/ tests/data/goldens-extra/*/ tests/data/goldens-family/*/; do
    [ -f "$d/config.json" ] || continue
    k=${d#tests/data/}; k=${k%/}
    want=${golden_tier[$k]:-}
    [ -n "$want" ] || { bad "$d: no expected tier in inspect.sh's table"; continue; }
    expect "${d%/}" "$(tier_rc "$want")" "$want"
    [ "$(json_field "$tmp/out.json" 'j.params > 0')" = true ] || bad "$d: no parameters counted"
done
[ "$(json_field <("$BIN" inspect --model tests/data/goldens-extra/deepseek_v3_mtp --json) 'j.mtp.layout')" = \
  "model.layers.N.*" ] || bad "deepseek MTP layout not detected"

# not a model: no config.json; config but no weights; missing directory
mkdir -p "$tmp/tok"; echo '{}' >"$tmp/tok/tokenizer.json"
expect "$tmp/tok" 30 not-a-model "no config.json"
mkdir -p "$tmp/noweights"; cp tests/data/goldens/llama/config.json "$tmp/noweights/"
expect "$tmp/noweights" 30 not-a-model "no safetensors weights"
expect "$tmp/missing" 30 not-a-model "not a directory"

# made-up architecture with real weights next to it
mkdir -p "$tmp/mamba"; cp tests/data/goldens/llama/model.safetensors "$tmp/mamba/"
echo '{"architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2", "hidden_size": 64, "num_hidden_layers": 3}' \
    >"$tmp/mamba/config.json"
expect "$tmp/mamba" 20 unsupported 'unknown model_type "mamba2"'

# refused RoPE scaling (dynamic NTK)
mkdir -p "$tmp/dyn"; cp tests/data/goldens/llama/model.safetensors "$tmp/dyn/"
sed 's/"rope_type": "default"/"rope_type": "dynamic", "factor": 4.0/' tests/data/goldens/llama/config.json >"$tmp/dyn/config.json"
expect "$tmp/dyn" 20 unsupported "dynamic"

# malformed config: error, exit 1, message names the file
mkdir -p "$tmp/broken"; cp tests/data/goldens/llama/model.safetensors "$tmp/broken/"
echo '{"model_type": "llama", "hidden_size": ' >"$tmp/broken/config.json"
"$BIN" inspect --model "$tmp/broken" >/dev/null 2>"$tmp/err.txt"; rc=$?
[ $rc = 1 ] || bad "broken config: exit $rc, want 1"
grep -q "config.json" "$tmp/err.txt" || bad "broken config: message lacks the file: $(cat "$tmp/err.txt")"

# incomplete checkpoint: headers fine, the loader (which inspect runs to confirm) names the tensor
mkdir -p "$tmp/partial"; cp tests/data/goldens/qwen3_5_dense/config.json "$tmp/partial/"
node -e '
const fs=require("fs"); const b=fs.readFileSync(process.argv[1]); const n=Number(b.readBigUInt64LE(0));
const h=JSON.parse(b.subarray(8,8+n).toString()); delete h["model.layers.1.self_attn.k_proj.weight"];
let t=Buffer.from(JSON.stringify(h)); t=Buffer.concat([t, Buffer.alloc((8-t.length%8)%8, 32)]);
const len=Buffer.alloc(8); len.writeBigUInt64LE(BigInt(t.length));
fs.writeFileSync(process.argv[2], Buffer.concat([len, t, b.subarray(8+n)]));' \
    tests/data/goldens/qwen3_5_dense/model.safetensors "$tmp/partial/model.safetensors"
"$BIN" inspect --model "$tmp/partial" >/dev/null 2>"$tmp/err.txt"; rc=$?
[ $rc = 1 ] || bad "partial checkpoint: exit $rc, want 1"
grep -q "model.layers.1.self_attn.k_proj.weight" "$tmp/err.txt" || bad "partial: message lacks the tensor: $(cat "$tmp/err.txt")"

# usage
"$BIN" inspect --help >"$tmp/help.txt"; [ $? = 0 ] || bad "--help exit"
grep -q "30  not-a-model" "$tmp/help.txt" || bad "--help does not document exit codes"
"$BIN" inspect --bogus >/dev/null 2>&1; [ $? = 2 ] || bad "unknown option is not exit 2"
"$BIN" inspect --context x >/dev/null 2>&1; [ $? = 2 ] || bad "bad --context is not exit 2"

[ $fail = 0 ] && echo "inspect: all checks passed"
exit $fail
