#!/usr/bin/env bash
# session 48 (lead): issue 17's prefill bar side by side on the idle 2-vCPU Intel Xeon without AMX (kernel path
# avx512), every format: mtplx `bench --prefill N` (best of its prefills) against llama.cpp d32676d's
# `llama-bench -p N -n 0 -r 2` (mean of 2), 2 threads both, alternated per model and length. llama.cpp is
# built in /tmp (GGML_NATIVE, CPU backend) and its GGUFs come from its own convert_hf_to_gguf.py --outtype
# bf16 then llama-quantize Q8_0 / Q4_0; mtplx's q8 / q4 models are its own `convert --q-bits 8|4` (MLX
# affine, group 64). Nothing of llama.cpp is committed. prefill-sbs-avx2.sh runs this with MENV / LENV (extra
# environment for mtplx / llama-bench) and SBS (the output file's name) set.
set -uo pipefail
MENV=${MENV:-} LENV=${LENV:-} SBS=${SBS:-sbs.txt}
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
        a=$(env $MENV MTPLX_THREADS=2 build/mtplx bench --prefill $n --model $dir --json | /usr/bin/python3 -c "import json,sys; print('%.1f' % json.load(sys.stdin)['prefill']['tok_s'])")
        b=$(env $LENV $LB -m $gguf -t 2 -p $n -n 0 -r 2 -o json 2>/dev/null | /usr/bin/python3 -c "import json,sys; print('%.1f' % json.load(sys.stdin)[0]['avg_ts'])")
        echo "round $r $m $mf/$lf $n mtplx $a llama.cpp $b ratio $(/usr/bin/python3 -c "print('%.2f' % ($a/$b))")" | tee -a $OUT/$SBS
      done
    done
  done
done
