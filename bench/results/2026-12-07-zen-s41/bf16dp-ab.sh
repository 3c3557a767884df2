#!/usr/bin/env bash
# session 41 (lead): on this Zen 5, the bf16 kernel without AMX — vdpbf16ps (AMD's default, MTPLX_BF16DP=1)
# against the FMA kernel with session 40's L2 prefetch (MTPLX_BF16DP=0) — bench-2b bf16 AR and verify 4 rows,
# the small model's 512-token prefill and its decode, alternated twice (2 threads, kernel path avx512)
OUT=${1:?out}; cd /work/main
for r in 1 2; do for k in 1 0; do
  echo "== round $r MTPLX_BF16DP=$k $(date +%T)"
  MTPLX_BF16DP=$k build/mtplx bench --membw --verify-cost --rows 4 --reps 7 --context 256 --model /tmp/bench-2b-bf16 2>&1 | grep -E "forward|AR decode"
  for i in 1 2; do MTPLX_BF16DP=$k build/mtplx bench --prefill 512 --model ../shared/models/qwen35-small-code 2>&1 | grep "^prefill"; done
  MTPLX_BF16DP=$k build/mtplx bench --model ../shared/models/qwen35-small-code --depths 0,3 --prompts 4 --max-tokens 128 --temperature 0.6 2>&1 | grep -E "^(AR|D3)"
done; done > $OUT/bf16dp-ab.txt 2>&1
