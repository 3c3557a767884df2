#!/usr/bin/env bash
# pack_cache.sh — the CPU backend's cache of repacked q4 weights with a MoE checkpoint
# (docs/architecture.md, "Pack cache"): a synthetic q4 MoE (16 experts of width 256, 2 layers + the
# MTP layer) whose expert projections are each under the 1 MiB a file of its own needs.
#  1. a first load writes one group file per MoE layer (3), each holding that layer's 48 copies
#     (the header's count), and its logits equal those of a load without the cache;
#  2. a second load maps the same files (same inodes, no new file): same logits, prefill and --step;
#  3. a flipped byte in a group file is caught by its checksum: the file is rewritten, same logits.
set -u
cd "$(dirname "$0")/../.."
BIN=build/mtplx
[ -x "$BIN" ] || { echo "build/mtplx is needed (make test builds it)"; exit 1; }
. tests/integration/lib.sh
it_init
fail() { echo "FAIL: $*" >&2; exit 1; }

python3 - "$tmp/moe.json" <<'EOF'
import json, sys
c = json.load(open("tests/data/goldens/qwen3_5_moe/config.json"))
c.update(hidden_size=256, moe_intermediate_size=256, shared_expert_intermediate_size=256, num_experts=16,
         num_experts_per_tok=4, num_hidden_layers=2, layer_types=["linear_attention", "full_attention"],
         vocab_size=512)
json.dump(c, open(sys.argv[1], "w"))
EOF
"$BIN" synth --config "$tmp/moe.json" --out "$tmp/moe" --dtype q4 --quiet >/dev/null || fail "synth"
T=$(seq -s, 1 40)
logits() { # CACHE OUT [--step]
    MTPLX_PACK_CACHE="$1" "$BIN" logits --model "$tmp/moe" --tokens "$T" --out "$2" ${3:-} >/dev/null 2>"$tmp/err" ||
        fail "logits (cache $1): $(cat "$tmp/err")"
}
inodes() { stat -c %i "$tmp/pc"/*.qpack | sort | tr '\n' ' '; }

logits 0 "$tmp/ref.st"
logits 0 "$tmp/ref-step.st" --step
logits "$tmp/pc" "$tmp/miss.st"
n=$(ls "$tmp/pc" | grep -c '\.qpack$')
if [ "$n" = 0 ]; then echo "SKIP pack_cache: this CPU does not repack q4 weights"; exit 0; fi
[ "$n" = 3 ] || fail "want 3 group files (2 layers + the MTP layer), found $n: $(ls "$tmp/pc")"
[ "$(ls "$tmp/pc" | wc -l)" = 3 ] || fail "stray files in the cache: $(ls "$tmp/pc")"
for f in "$tmp/pc"/*.qpack; do # the header's count (uint64 at byte 72): 16 experts x 3 projections
    c=$(od -An -t u8 -j 72 -N 8 "$f" | tr -d ' ')
    [ "$c" = 48 ] || fail "$(basename "$f"): count $c, want 48"
done
cmp -s "$tmp/ref.st" "$tmp/miss.st" || fail "logits after a cache miss differ from those without the cache"
before=$(inodes)
logits "$tmp/pc" "$tmp/hit.st"
logits "$tmp/pc" "$tmp/hit-step.st" --step
[ "$(inodes)" = "$before" ] || fail "a hit rewrote the cache files"
cmp -s "$tmp/ref.st" "$tmp/hit.st" || fail "logits from the mapped copies differ"
cmp -s "$tmp/ref-step.st" "$tmp/hit-step.st" || fail "--step logits from the mapped copies differ"

f=$(ls "$tmp/pc"/*.qpack | head -1)
old=$(stat -c %i "$f")
printf '\377' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") - 5000)) conv=notrunc status=none
logits "$tmp/pc" "$tmp/fixed.st"
[ "$(stat -c %i "$f" 2>/dev/null)" != "$old" ] || fail "the corrupted group file was not rewritten"
[ "$(ls "$tmp/pc" | wc -l)" = 3 ] || fail "the rebuild left other files: $(ls "$tmp/pc")"
cmp -s "$tmp/ref.st" "$tmp/fixed.st" || fail "logits after the rebuild differ"
echo "pack_cache.sh: ok"
