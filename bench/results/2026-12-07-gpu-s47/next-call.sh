#!/usr/bin/env bash
# Session 47, prepared and not run (no machine started): the decode matmuls' weights prefetched before their
# PDL wait (pdl-early.patch, MTPLX_CUDA_PDL_EARLY=0 / 1 (L1) / 2 (L2)). Apply the patch first
# (git apply bench/results/2026-12-07-gpu-s47/pdl-early.patch), carry ["build/device-debs"]. (1) bits of
# EARLY 0 vs 1 vs 2 (embedded bf16 and q4); test_backend_cuda; (2) embedded D8@0.4 with EARLY 0 / 1 / 2
# alternated; (3) the 27B-16l shape's AR decode (--membw, verify cost) with EARLY 0 / 1 / 2, q4 and bf16.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda > /tmp/build.txt 2>&1 ||
    { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
(for d in q4 bf16; do build/mtplx synth --preset qwen35-27b-16l --dtype $d --out /tmp/s/$d --quiet; done) &
SY=$!
build/mtplx convert --q-bits 4 --out /tmp/emb-q4 > /dev/null 2>&1 && cp models/qwen35-tiny-code/val_code.txt /tmp/emb-q4/
for pair in "0 1" "0 2"; do set -- $pair
    bench/cuda_same_bits.sh "env MTPLX_CUDA_PDL_EARLY=$1 build/mtplx" "env MTPLX_CUDA_PDL_EARLY=$2 build/mtplx" > $OUT/bits-$1-$2.txt 2>&1
    echo "[$(el) s] embedded bf16 EARLY $1 vs $2: $(tail -1 $OUT/bits-$1-$2.txt)"
done
bench/cuda_same_bits.sh "env MTPLX_MODEL=/tmp/emb-q4 MTPLX_CUDA_PDL_EARLY=0 build/mtplx" "env MTPLX_MODEL=/tmp/emb-q4 build/mtplx" > $OUT/bits-q4.txt 2>&1
echo "[$(el) s] embedded q4 EARLY 0 vs 1: $(tail -1 $OUT/bits-q4.txt)"
timeout 120 build/tests/test_backend_cuda > /tmp/tbc.txt 2>&1; echo "[$(el) s] test_backend_cuda rc=$?: $(tail -1 /tmp/tbc.txt)"
B="--device cuda --prompts 8 --temperature 0.6 --max-tokens 256 --depths 0,3,8@0.4"
for r in 1 2; do for e in 0 1 2; do
    echo "== round $r EARLY=$e" >> $OUT/early.txt
    MTPLX_CUDA_PDL_EARLY=$e build/mtplx bench $B >> $OUT/early.txt 2>&1
done; done
grep -E "^== |^(AR|D[0-9])" $OUT/early.txt | awk '/^==/{printf "\n%s:", $0; next} {printf " %s %s %s/%s", $1, $2, $6, $7}'; echo
wait $SY; echo "[$(el) s] embedded A/B done, 27B-16l synthesized"
for r in 1 2; do for d in q4 bf16; do for e in 0 1 2; do
    [ $(el) -lt 540 ] || { echo "out of time"; break 3; }
    echo "== round $r $d EARLY=$e" >> $OUT/27b.txt
    MTPLX_CUDA_PDL_EARLY=$e build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 \
        --model /tmp/s/$d >> $OUT/27b.txt 2>&1
    echo "[$(el) s] $d EARLY=$e r$r: $(grep -E 'AR decode' $OUT/27b.txt | tail -1)"
done; done; done
echo "[$(el) s] done"
