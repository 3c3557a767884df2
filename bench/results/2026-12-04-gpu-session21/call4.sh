#!/usr/bin/env bash
# session 21 call 4 (pass 2 on dim pairs, staging a row per 8 threads): grouped attention staged through shared memory (MTPLX_CUDA_ATT_GROUP=1 default) vs one
# query a block (=0): bit identity (embedded 699-token prefill / --mtp / --step, small shape 570 tokens),
# 27B-16l q4 verify 1/4/8 rows at contexts 256 / 8192 / 16384, 4k prefill, small shape calibration
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
T=$(seq -s, 5 3 2100)
for mode in "" "--mtp" "--step" "--step --mtp"; do
  MTPLX_CUDA_ATT_GROUP=0 build/mtplx logits --device cuda --tokens $T $mode --out /tmp/a0.st > /dev/null 2>$OUT/l0.err
  MTPLX_CUDA_ATT_GROUP=1 build/mtplx logits --device cuda --tokens $T $mode --out /tmp/a1.st > /dev/null 2>$OUT/l1.err
  cmp /tmp/a0.st /tmp/a1.st && echo "emb 699 [$mode] ATT_GROUP 0 == 1" | tee -a $L || { echo "DIFFER emb [$mode]" | tee -a $L; tail -3 $OUT/l1.err | tee -a $L; }
done
M=/tmp/smsyn
rm -rf $M; build/mtplx synth --config bench/configs/qwen35-small-code.json --out $M --quiet
cp models/qwen35-tiny-code/{tokenizer_config.json,generation_config.json} $M/; for f in tokenizer.json val_code.txt; do xz -dc models/qwen35-tiny-code/$f.xz > $M/$f; done
T=$(seq -s, 11 7 4000)
for mode in "" "--step --mtp"; do
  for g in 0 1; do MTPLX_CUDA_ATT_GROUP=$g build/mtplx logits --device cuda --model $M --tokens $T $mode --out /tmp/b$g.st > /dev/null; done
  cmp /tmp/b0.st /tmp/b1.st && echo "smsyn 570 [$mode] ATT_GROUP 0 == 1" | tee -a $L || echo "DIFFER smsyn [$mode]" | tee -a $L
done
echo "checks $(el) s" | tee -a $L
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet 2>&1 | tail -1 | tee -a $L
echo "synth $(el) s" | tee -a $L
for ctx in 256 8192 16384; do for r in 1 2; do for g in 1 0; do
  echo "27B-16l q4 ctx $ctx ATT_GROUP=$g: $(MTPLX_CUDA_ATT_GROUP=$g timeout 100 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 8 --reps 5 --context $ctx --logits-top 20 2>&1 | grep -E ' (1|2|4|8)-row forward' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|')" | tee -a $L
done; done; done
echo "verify $(el) s" | tee -a $L
for g in 1 0; do
  echo "27B-16l q4 prefill 4096 ATT_GROUP=$g: $(MTPLX_CUDA_ATT_GROUP=$g timeout 100 build/mtplx bench --device cuda --model /tmp/q27 --prefill 4096 2>&1 | grep -iE 'tok/s' | tail -2 | tr '\n' '|')" | tee -a $L
done
echo "total $(el) s" | tee -a $L
