#!/usr/bin/env bash
# session 29 (lead): prefill side by side on the idle 2-vCPU Intel Xeon (AMX) VM in q8 / q4: mtplx on its
# own MLX-affine conversions (`mtplx convert --q-bits 8|4`, group 64) against llama.cpp d32676d on Q8_0 /
# Q4_0 (`llama-quantize` of its bf16 GGUFs) — llama.cpp's AMX path takes these types (llama-bench -v:
# "amx repack tensor ... q4_0"), unlike bf16 — but that path dies of SIGILL on this VM (tileloadd in
# ggml_backend_amx_mul_mat), so LB is a second build without it (GGML_NATIVE=OFF, AVX-512 / VNNI / BF16 /
# AVX-VNNI on, GGML_AMX_* off), which repacks Q4_0 / Q8_0 for its AVX-512 kernels (q4_0_8x8). Alternated
# per round as prefill-sbs.sh; 2 threads both.
set -uo pipefail
OUT=${1:?out}; mkdir -p $OUT
cd /work/main
LB=${LB:-/tmp/llama/build-noamx/bin/llama-bench}
for r in 1 2 3; do
  for q in 8:Q8_0 4:Q4_0; do
    IFS=: read b lq <<< "$q"
    for m in small:/tmp/small-q$b:/tmp/gguf/small-$lq.gguf embedded:/tmp/emb-q$b:/tmp/gguf/emb-$lq.gguf; do
      IFS=: read name dir gguf <<< "$m"
      for n in 512 4096; do
        a=$(MTPLX_THREADS=2 build/mtplx bench --prefill $n --model $dir --json | python3 -c "import json,sys; print('%.1f' % json.load(sys.stdin)['prefill']['tok_s'])")
        c=$($LB -m $gguf -t 2 -p $n -n 0 -r 2 -o json 2>/dev/null | python3 -c "import json,sys; print('%.1f' % json.load(sys.stdin)[0]['avg_ts'])")
        echo "round $r $name q$b/$lq $n mtplx $a llama.cpp $c ratio $(python3 -c "print('%.2f' % ($a/$c))")" | tee -a $OUT/sbs-quant.txt
      done
    done
  done
done
