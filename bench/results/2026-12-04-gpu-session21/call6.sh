#!/usr/bin/env bash
# session 21 call 6: the grouped attention on head width 128 (random small shape): verify of 8 rows at 2048 /
# 8192 keys, forced (=2) / default / off; serve's calibration; embedded bench D3 default vs off
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
M=/tmp/smsyn
rm -rf $M; build/mtplx synth --config bench/configs/qwen35-small-code.json --out $M --quiet
cp models/qwen35-tiny-code/{tokenizer_config.json,generation_config.json} $M/; for f in tokenizer.json val_code.txt; do xz -dc models/qwen35-tiny-code/$f.xz > $M/$f; done
for ctx in 2048 8192; do for r in 1 2; do for g in 2 1 0; do
  echo "smsyn ctx $ctx ATT_GROUP=$g: $(MTPLX_CUDA_ATT_GROUP=$g timeout 60 build/mtplx bench --device cuda --model $M --verify-cost --rows 8 --reps 5 --context $ctx --logits-top 20 2>&1 | grep -E ' (1|2|4|8)-row forward' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|')" | tee -a $L
done; done; done
B="bench --device cuda --depths 0,3 --temperature 0.6 --prompts 8"
for g in 1 0; do
  echo "== emb ATT_GROUP=$g: $(MTPLX_CUDA_ATT_GROUP=$g build/mtplx $B 2>&1 | grep -E '^(AR|D3) ' | awk '{print $1, $2, "verify", $7, "draft", $6}' | tr '\n' '|')" | tee -a $L
done
echo "total $(el) s" | tee -a $L
