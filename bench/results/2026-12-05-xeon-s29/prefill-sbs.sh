#!/usr/bin/env bash
# session 29 (lead): prefill side by side on the idle 2-vCPU Intel Xeon (AMX) VM, mtplx and llama.cpp
# d32676d (built in /tmp, CPU backend, GGML_NATIVE; GGUFs from its own converter, bf16), alternated per
# round: mtplx `bench --prefill N` (best of 4 prefills), then llama-bench -p N -n 0 -r 2 (mean of 2),
# 2 threads both
set -uo pipefail
OUT=${1:?out}; mkdir -p $OUT
cd /work/main
LB=/tmp/llama/build/bin/llama-bench
for r in 1 2 3; do  # llama.cpp d32676d here too; its bf16 weights take AVX512-BF16, not AMX (llama-bench -v)
  for m in small:../shared/models/qwen35-small-code:/tmp/gguf/small-bf16.gguf embedded:models/qwen35-tiny-code:/tmp/gguf/emb-bf16.gguf; do
    IFS=: read name dir gguf <<< "$m"
    for n in 512 4096; do
      a=$(MTPLX_THREADS=2 build/mtplx bench --prefill $n --model $dir --json | python3 -c "import json,sys; print('%.1f' % json.load(sys.stdin)['prefill']['tok_s'])")
      b=$($LB -m $gguf -t 2 -p $n -n 0 -r 2 -o json 2>/dev/null | python3 -c "import json,sys; print('%.1f' % json.load(sys.stdin)[0]['avg_ts'])")
      echo "round $r $name $n mtplx $a llama.cpp $b ratio $(python3 -c "print('%.2f' % ($a/$b))")" | tee -a $OUT/sbs-bf16.txt
    done
  done
done
