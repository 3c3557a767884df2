#!/usr/bin/env bash
# grammar.sh — structured output cost in instructions (valgrind callgrind, deterministic; for a loaded
# machine where wall-clock numbers are noise). On one model (default ../shared/models/qwen35-small-code)
# and one chat prompt with an empty think block, for each of {unconstrained, JSON Schema} x {AR, MTP
# depth D}: the instructions of decoding, per completion token, as Ir(max_tokens N) - Ir(max_tokens 1)
# (load, draft quantization and prefill cancel), over S seeds; the MTP "speedup" is the ratio of
# instructions per token AR / MTP (a proxy: decode is memory-bound, so instructions understate it, but
# the constrained / unconstrained ratio of the two is what the mask changes); and the mask's own cost:
# instructions inside grammar_matcher_* (mask walks and cache lookups, advances, rollbacks) per token,
# from callgrind_annotate. The masking loop of cycle.c (one pass over V logits per row) is inlined into
# cycle_step and is estimated as 2 instructions per id per masked row.
#
#   bash bench/grammar.sh [MODEL_DIR] [DEPTH] [N] [SEEDS]       # defaults: small-code, 3, 48, 3
# MTPLX_BIN names the binary (default build/mtplx; a copy keeps a long run independent of rebuilds).
set -u
cd "$(dirname "$0")/.."
model=${1:-../shared/models/qwen35-small-code}
depth=${2:-3}
n=${3:-48}
seeds=${4:-3}
bin=${MTPLX_BIN:-build/mtplx}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '<|im_start|>user\nDescribe the function read_file as JSON.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n' >"$out/prompt"
cat >"$out/schema.json" <<'EOF'
{"type":"object","properties":{"name":{"type":"string","maxLength":24},"lines":{"type":"integer","minimum":0,"maximum":500},
 "kind":{"enum":["function","class","module"]},"args":{"type":"array","items":{"type":"string","maxLength":16},"maxItems":4}},
 "required":["name","lines","kind","args"],"additionalProperties":false}
EOF
# run NAME DEPTH MAXTOK SEED [schema]: prints "Ir completion_tokens grammar_Ir"
run() {
    local f="$out/$1.cg"
    local extra=()
    [ "${5:-}" = schema ] && extra=(--json-schema "$out/schema.json")
    local tok
    tok=$(MTPLX_THREADS=1 valgrind --tool=callgrind --callgrind-out-file="$f" "$bin" run --model "$model" \
        --prompt-file "$out/prompt" --seed "$4" --temperature 1 --top-p 1 --top-k 0 --depth "$2" --max-tokens "$3" \
        --json "${extra[@]}" 2>/dev/null | sed -n 's/.*"completion_tokens":\([0-9]*\).*/\1/p')
    local ir gir
    ir=$(sed -n 's/^summary: *//p; s/^totals: *//p' "$f" | head -1 | awk '{print $1}')
    gir=$(callgrind_annotate --inclusive=yes "$f" 2>/dev/null | awk '/grammar_matcher_(mask|advance|rollback|ended)/ {gsub(",", "", $1); s += $1} END {print s + 0}')
    echo "$ir $tok $gir"
    echo "run $1: Ir $ir completion_tokens $tok grammar_Ir $gir" >&2
}
printf '%-14s %6s %14s %8s %14s %12s\n' config depth "Ir/token" tokens "grammar Ir/tok" "mask+walk %"
for mode in free schema; do
    for d in 0 "$depth"; do
        tot_ir=0 tot_tok=0 tot_g=0
        for s in $(seq 1 "$seeds"); do
            read -r ir1 _ g1 < <(run "${mode}_${d}_${s}_1" "$d" 1 "$s" "$mode")
            read -r irn tokn gn < <(run "${mode}_${d}_${s}_n" "$d" "$n" "$s" "$mode")
            tot_ir=$((tot_ir + irn - ir1))
            tot_tok=$((tot_tok + tokn - 1))
            tot_g=$((tot_g + gn - g1))
        done
        per=$((tot_ir / tot_tok))
        gper=$((tot_g / tot_tok))
        eval "ir_${mode}_$d=$per"
        printf '%-14s %6s %14d %8d %14d %11.2f%%\n' "$mode" "$d" "$per" "$tot_tok" "$gper" \
            "$(echo "100 * $gper / $per" | bc -l)"
    done
done
su=$(echo "$ir_free_0 / $ir_free_$depth" | bc -l 2>/dev/null || true)
eval "fu=\$ir_free_$depth; sc=\$ir_schema_$depth"
printf 'instruction speedup AR/MTP depth %s: unconstrained %.3f, under the schema %.3f, ratio %.3f\n' "$depth" \
    "$(echo "$ir_free_0 / $fu" | bc -l)" "$(echo "$ir_schema_0 / $sc" | bc -l)" \
    "$(echo "($ir_schema_0 / $sc) / ($ir_free_0 / $fu)" | bc -l)"
