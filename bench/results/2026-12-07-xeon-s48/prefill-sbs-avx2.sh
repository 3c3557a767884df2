#!/usr/bin/env bash
# session 48 (lead): prefill-sbs.sh again on the AVX2-only paths of both, as on an AVX2-only machine: mtplx
# with MTPLX_KERNEL=avx2 MTPLX_AVXVNNI=0; llama.cpp d32676d's ggml-cpu rebuilt with -DGGML_NATIVE=OFF
# -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON (no AVX-512, no AVX-VNNI) in /tmp/llama-cpu/b-avx2
# and loaded through LD_LIBRARY_PATH by the same llama-bench. Same models, GGUFs, lengths and alternation;
# Intel Xeon without AMX, 2 vCPUs, idle. Nothing of llama.cpp is committed.
set -uo pipefail
OUT=${1:?out}; mkdir -p $OUT
cd /work/main
LB=${LB:-/tmp/llama-cpu/b/bin/llama-bench}
for r in 1 2; do
  for f in bf16:bf16 q8:Q8_0 q4:Q4_0; do
    IFS=: read mf lf <<< "$f"
    for m in small embedded; do
      if [ $mf = bf16 ]; then dir=$([ $m = small ] && echo ../shared/models/qwen35-small-code || echo models/qwen35-tiny-code)
      else dir=/tmp/$([ $m = small ] && echo small || echo emb)-$mf; fi
      gguf=/tmp/gguf/$([ $m = small ] && echo small || echo emb)-$lf.gguf
      for n in 512 4096; do
        a=$(MTPLX_KERNEL=avx2 MTPLX_AVXVNNI=0 MTPLX_THREADS=2 build/mtplx bench --prefill $n --model $dir --json | /usr/bin/python3 -c "import json,sys; print('%.1f' % json.load(sys.stdin)['prefill']['tok_s'])")
        b=$(LD_LIBRARY_PATH=/tmp/llama-cpu/b-avx2/bin $LB -m $gguf -t 2 -p $n -n 0 -r 2 -o json 2>/dev/null | /usr/bin/python3 -c "import json,sys; print('%.1f' % json.load(sys.stdin)[0]['avg_ts'])")
        echo "round $r $m $mf/$lf $n mtplx $a llama.cpp $b ratio $(/usr/bin/python3 -c "print('%.2f' % ($a/$b))")" | tee -a $OUT/sbs-avx2.txt
      done
    done
  done
done
