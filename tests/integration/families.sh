#!/usr/bin/env bash
# families.sh — `mtplx logits` on every non-Qwen3.5-dense family golden (public and other shapes):
# prefill and --step, with --mtp where the golden has MTP logits, within 1e-3 of HF (YaRN goldens
# included); then a checkpoint with an unimplemented RoPE type (dynamic NTK) and one of an unknown architecture are refused with a
# reason and exit status 1 (sanitizer build).
set -euo pipefail
cd "$(dirname "$0")/../.."
M=build/mtplx
MA=build/asan/mtplx
[ -x "$MA" ] || MA=$M
CMP=tests/integration/logits_compare.js
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for dir in tests/data/goldens/{qwen3_5_moe,qwen3_next,qwen3_dense,llama,deepseek_v3} \
           tests/data/goldens-extra/{qwen3_5_moe_b,qwen3_next_b,qwen3_dense_b,llama_llama3rope,llama_linearrope,deepseek_v3_b,deepseek_v3_mtp} \
           tests/data/goldens-family/{deepseek_v3_yarn,qwen3_yarn}; do
    ids=$(node "$CMP" ids "$dir/golden.safetensors")
    mtp=""
    node -e 'const b=require("fs").readFileSync(process.argv[1]); const n=Number(b.readBigUInt64LE(0));
      process.exit("mtp_logits" in JSON.parse(b.subarray(8, 8 + n).toString()) ? 0 : 1)' "$dir/golden.safetensors" \
        && mtp=--mtp
    for mode in prefill step; do
        flag=""
        [ "$mode" = step ] && flag=--step
        rc=0
        "$M" logits --model "$dir" --tokens "$ids" $mtp $flag --out "$tmp/out.safetensors" >"$tmp/stdout" || rc=$?
        [ "$rc" = 0 ] || fail "$dir $mode: exit $rc"
        echo "$dir ($mode${mtp:+, mtp}):"
        node "$CMP" compare "$tmp/out.safetensors" "$dir/golden.safetensors" 1e-3 || fail "$dir $mode: differs from golden"
    done
done

# refused with a reason, never run with the wrong math
expect_refused() { # dir pattern
    local rc=0
    "$MA" logits --model "$1" --tokens 1,2,3 >"$tmp/o" 2>"$tmp/e" || rc=$?
    [ "$rc" = 1 ] || fail "$1: exit $rc, expected 1 ($(cat "$tmp/e"))"
    grep -q -- "$2" "$tmp/e" || fail "$1: message '$(cat "$tmp/e")' lacks '$2'"
    echo "refused: $(cat "$tmp/e")"
}
mkdir -p "$tmp/dyn" "$tmp/mamba"
sed 's/"rope_type": "default"/"rope_type": "dynamic", "factor": 4.0/' \
    tests/data/goldens/deepseek_v3/config.json >"$tmp/dyn/config.json"
cp tests/data/goldens/deepseek_v3/model.safetensors "$tmp/dyn/"
expect_refused "$tmp/dyn" 'rope_type "dynamic"'
sed 's/"model_type": "llama"/"model_type": "mamba2"/' tests/data/goldens/llama/config.json >"$tmp/mamba/config.json"
cp tests/data/goldens/llama/model.safetensors "$tmp/mamba/"
expect_refused "$tmp/mamba" "mamba2"
echo "families.sh: ok"
