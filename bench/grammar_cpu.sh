#!/usr/bin/env bash
# grammar_cpu.sh — CPU time (user + sys) per decoded token, unconstrained vs under a JSON Schema, AR vs
# MTP depth D, on a loaded machine where wall clock is noise (bench/grammar.md). Per configuration:
# `mtplx run --samples S` at max_tokens 1 and N; per token = CPU difference / (tokens - 1 per sample).
#   bash bench/grammar_cpu.sh [MODEL] [DEPTH] [N] [SAMPLES]     # defaults: small-code, 3, 64, 8
# Modes: free (unconstrained), schema (bounded strings, integer, enum, array), pattern (the same with
# pattern / format strings and uniqueItems). MTPLX_BIN names the binary (default build/mtplx).
set -u
cd "$(dirname "$0")/.."
model=${1:-../shared/models/qwen35-small-code}
depth=${2:-3}
n=${3:-64}
samples=${4:-8}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '<|im_start|>user\nDescribe the function read_file as JSON.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n' >"$out/prompt"
cat >"$out/schema.json" <<'JSON'
{"type":"object","properties":{"name":{"type":"string","maxLength":24},"lines":{"type":"integer","minimum":0,"maximum":500},
 "kind":{"enum":["function","class","module"]},"args":{"type":"array","items":{"type":"string","maxLength":16},"maxItems":4}},
 "required":["name","lines","kind","args"],"additionalProperties":false}
JSON
# the same object with pattern / format strings (src/grammar/regex.c) and the newer keywords
cat >"$out/pattern.json" <<'JSON'
{"type":"object","properties":{"name":{"type":"string","pattern":"^[a-z_][a-z0-9_]{0,23}$"},
 "lines":{"type":"integer","minimum":0,"maximum":500},"kind":{"enum":["function","class","module"]},
 "args":{"type":"array","items":{"enum":["path","mode","size","flags"]},"uniqueItems":true},
 "modified":{"type":"string","format":"date"}},
 "required":["name","lines","kind","args","modified"],"additionalProperties":false}
JSON
bin=${MTPLX_BIN:-build/mtplx}
for mode in free schema pattern; do
    for d in 0 "$depth"; do
        extra=()
        [ $mode = schema ] && extra=(--json-schema "$out/schema.json")
        [ $mode = pattern ] && extra=(--json-schema "$out/pattern.json")
        for mt in 1 "$n"; do
            /usr/bin/time -f "%U %S" -o "$out/$mode.$d.$mt.time" env MTPLX_THREADS=1 "$bin" run --model "$model" \
                --prompt-file "$out/prompt" --samples "$samples" --seed 11 --temperature 1 --top-p 1 --top-k 0 \
                --depth "$d" --max-tokens "$mt" --json "${extra[@]}" >"$out/$mode.$d.$mt.jsonl" 2>/dev/null
        done
        /usr/bin/python3 - "$out" "$mode" "$d" "$n" <<'PY'
import json, sys
out, mode, d, n = sys.argv[1:]
def load(mt):
    rows = [json.loads(l) for l in open(f"{out}/{mode}.{d}.{mt}.jsonl")]
    u, s = map(float, open(f"{out}/{mode}.{d}.{mt}.time").read().split()[-2:])
    return rows, u + s
rn, cn = load(n)
r1, c1 = load(1)
toks = sum(r['stats']['completion_tokens'] for r in rn) - len(rn)
cyc = sum(r['stats']['cycles'] for r in rn)
acc = sum(r['stats']['acceptance_rate'] for r in rn) / len(rn)
print(f"{mode:6s} depth {d}: {toks} tokens, CPU {(cn - c1) / toks * 1000:.3f} ms/token, "
      f"tokens/verify {toks / max(cyc, 1):.2f}, acceptance {acc:.3f}")
PY
    done
done
