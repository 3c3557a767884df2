#!/usr/bin/env bash
# ab.sh — session 46: the AVX-512 bf16 kernel on even/odd packed activations (MTPLX_BF16X=1, the new
# default where the AVX512-BF16 kernel is not chosen) against the widening FMA kernel (=0), alternated
# twice on an idle VM. Needs build/mtplx, ../shared/models/qwen35-small-code and /tmp/bench-2b-bf16
# (mtplx synth --preset bench-2b --dtype bf16 --out /tmp/bench-2b-bf16). Output: ab.txt beside it.
cd "$(dirname "$0")/../../.." || exit 1
out=bench/results/2026-12-07-xeon-s46/ab.txt
small=../shared/models/qwen35-small-code
{
  echo "# $(date -u) $(git rev-parse --short HEAD) $(grep -m1 'model name' /proc/cpuinfo)"
  for round in 1 2; do
    for v in 0 1; do
      echo "## round $round MTPLX_BF16X=$v"
      export MTPLX_BF16X=$v
      build/mtplx bench --prompts 8 --max-tokens 256 --temperature 0.6 --depths 0,3,6@0.4 2>&1 | grep -E "^(AR|D3|D6)" | sed 's/^/embedded /'
      build/mtplx bench --model $small --prompts 4 --max-tokens 128 --temperature 0.6 --depths 0,3 2>&1 | grep -E "^(AR|D3)" | sed 's/^/small /'
      for m in $small models/qwen35-tiny-code; do
        for n in 512 4096; do echo "prefill $(basename $m) $n: $(build/mtplx bench --model $m --prefill $n 2>&1 | tail -1)"; done
      done
      build/mtplx bench --model /tmp/bench-2b-bf16 --membw --verify-cost --rows 4 --reps 5 --context 256 2>&1 | tail -8 | sed 's/^/bench-2b /'
    done
  done
} > "$out" 2>&1
