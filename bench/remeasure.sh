#!/usr/bin/env bash
# bench/remeasure.sh — every speed figure issues 4 and 5 ask for, in one run on an idle machine:
#   1. decode AR vs MTP depths on the embedded model (T 0.6, top_p 0.95, top_k 20), 2 threads and 1;
#   2. the same on ../shared/models/qwen35-small-code when present (memory-bound 78M model);
#   3. the q8 and q4 conversions of the embedded model (mtplx convert), AR vs depths;
#   4. one draft step's cost split per draft format (bench --draft-cost), expected acceptance per
#      format (--draft-accept), adaptive depth (--draft-min-conf 0.4 / 0.5 at depths 4, 6, 8);
#   5. bench-2b q4 / q8 / bf16: bandwidth, AR fraction, verify cost, prefill (bench/kernels.sh).
# Usage: bash bench/remeasure.sh OUTDIR   (env: MTPLX binary, B2B_DIR for the GB-size checkpoints,
# SKIP_B2B=1 to skip part 5). Results: OUTDIR/*.json + OUTDIR/*.txt; nothing is written elsewhere.
set -u
out=${1:?output dir}
bin=${MTPLX:-build/mtplx}
tmp=${B2B_DIR:-/tmp}
mkdir -p "$out"
S=(--temperature 0.6 --top-p 0.95 --top-k 20)
D=(--prompts 8 --prompt-len 64 --max-tokens 96 --repeats 3)
{ date -u; git rev-parse --short HEAD; nproc; lscpu | grep -E "Model name|L2|L3"; uptime; } > "$out/machine.txt" 2>&1

run() { # name, then the command
    local name=$1; shift
    echo "== $name: $*" | tee -a "$out/commands.txt"
    "$@" > "$out/$name.txt" 2>&1
    grep -E "^(AR|D[0-9])|x 1-row|AR decode|draft" "$out/$name.txt" | head -20
}

run tiny-d0-5 "$bin" bench --depths 0,1,2,3,4,5 "${D[@]}" "${S[@]}"
run tiny-d0-5-t1 env MTPLX_THREADS=1 "$bin" bench --depths 0,1,2,3,4,5 "${D[@]}" "${S[@]}"
run tiny-t1.0 "$bin" bench --depths 0,2,3,4 "${D[@]}" --temperature 1.0
run tiny-avx512 env MTPLX_KERNEL=avx512 "$bin" bench --depths 0,3 "${D[@]}" "${S[@]}"
sc=../shared/models/qwen35-small-code
[ -d "$sc" ] && run small-code "$bin" bench --model "$sc" --depths 0,2,3,4,5 "${D[@]}" "${S[@]}"

for q in 8 4; do
    ck=$tmp/tiny-q$q
    [ -f "$ck/config.json" ] || "$bin" convert --model models/qwen35-tiny-code --q-bits $q --group-size 64 --out "$ck" > /dev/null
    cp models/qwen35-tiny-code/val_code.txt "$ck/" # the bench's prompts
    run tiny-q$q "$bin" bench --model "$ck" --depths 0,2,3,4 "${D[@]}" "${S[@]}"
done

run draft-cost "$bin" bench --draft-cost --draft-quants none,q8,q4/nopack,q4,q4:128
run draft-accept "$bin" bench --draft-accept --draft-quants none,q8,q4,q4:128 --prompts 8 --prompt-len 64 --generate 128
# adaptive depth (issue 4): D@X entries run side by side with the fixed depths
run tiny-adaptive "$bin" bench --depths 0,3,4,6@0.4,6@0.5,8@0.5 "${D[@]}" "${S[@]}"

if [ "${SKIP_B2B:-0}" != 1 ]; then
    B2B_DIR=$tmp MTPLX=$bin bash bench/kernels.sh "$out/b2b" q4 q8 bf16 | tail -5
fi
echo "results in $out"
