#!/usr/bin/env bash
# session 9 call 1 (lead): gpu-test on main + the 32-row stream-K pass; llama.cpp CUDA beside mtplx on the embedded model
set -uo pipefail
# (the llama.cpp peer's lines, which built and ran the fetched snapshot in /tmp on the device, are left out of
#  this copy: bench/cuda.md "Session 9" says what they did)
t0=$(date +%s); R=$PWD; L=$OUT/log.txt
cp -r models/qwen35-tiny-code /tmp/emb && rm -f /tmp/emb/*.xz
python3 -c "import json;p='/tmp/emb/config.json';c=json.load(open(p));c['full_attention_interval']=3;json.dump(c,open(p,'w'),indent=1)"
bash scripts/gpu-test.sh 2>&1 | tee $OUT/gpu-test.txt
echo "gpu-test done at $(( $(date +%s) - t0 )) s" | tee -a $L
cp models/qwen35-tiny-code/model-*.safetensors /tmp/emb/; rm -f /tmp/emb/golden.safetensors
build/mtplx convert --q-bits 4 --out /tmp/emb-q4 --model /tmp/emb --quiet; build/mtplx convert --q-bits 8 --out /tmp/emb-q8 --model /tmp/emb --quiet; cp /tmp/emb/val_code.txt /tmp/emb-q4/; cp /tmp/emb/val_code.txt /tmp/emb-q8/
for m in /tmp/emb /tmp/emb-q8 /tmp/emb-q4; do
  echo "== mtplx $m" | tee -a $L
  build/mtplx bench --device cuda --model $m --depths 0,3 2>&1 | tail -4 | tee -a $L
  for p in 512 4096; do build/mtplx bench --device cuda --model $m --prefill $p 2>&1 | tail -1 | tee -a $L; done
done
echo "mtplx done at $(( $(date +%s) - t0 )) s" | tee -a $L
echo "total $(( $(date +%s) - t0 )) s" | tee -a $L
