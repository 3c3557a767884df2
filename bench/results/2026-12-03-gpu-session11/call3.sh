#!/usr/bin/env bash
# session 11 call 3 (lead): gpu-test on the sliced top-k + the per-shape stream-K floor; the floor
# against the old 2U one (MTPLX_CUDA_SK_MINU=16 bf16 / 8 q4); 27B-16l bf16 1 / 8 / 64 streams through
# the scheduler (T 0.6 top-k 20 top-p 0.95, 128 tokens each)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
timeout 300 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(( $(date +%s)-t0 )) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | tee -a $L; echo | tee -a $L
build/mtplx synth --config .gpu-lead/small-config.json --out /tmp/sb --quiet
build/mtplx synth --config .gpu-lead/small-config.json --dtype q4 --out /tmp/sq --quiet
vc() { MTPLX_CUDA_SK_MINU=$2 timeout 60 build/mtplx bench --device cuda --model $1 --verify-cost --rows 8 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E '^ +(1|2|4|8)-row' | awk '{printf "%s %s  ", $1, $3}'; }
for r in 1 2; do echo "== sb new: $(vc /tmp/sb 0)"; echo "== sb old(16): $(vc /tmp/sb 16)"; echo "== sq new: $(vc /tmp/sq 0)"; echo "== sq old(8): $(vc /tmp/sq 8)"; done | tee -a $L
for r in 1 2 3; do for mu in 0 16; do echo "== emb MINU=$mu $(MTPLX_CUDA_SK_MINU=$mu timeout 60 build/mtplx bench --device cuda --depths 0,3 2>&1 | grep -E '^(AR|D3)' | awk '{printf "%s %s ", $1, $2}')"; done; done | tee -a $L
timeout 100 build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/b27 --quiet
P="--prompt-tokens 11,22,33,44,55,66,77,88 --max-tokens 128 --temperature 0.6 --top-k 20 --top-p 0.95 --seed 1"
for n in 1 8 64; do echo "== 27B AR samples $n: $(timeout 100 build/mtplx run --device cuda --model /tmp/b27 $P --depth 0 --samples $n --parallel --max-seqs 64 --quiet 2>&1 >/dev/null | tail -1 | cut -c1-160)"; done | tee -a $L
echo "total $(( $(date +%s)-t0 )) s" | tee -a $L
