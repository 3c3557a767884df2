#!/usr/bin/env bash
# session 14 call 6: what a GDN row costs on the 27B-16l shape — ncu kernel durations of the conv and the
# recurrence (k_gdn_reg_seqs) for prompts of 1, 8 and 64 tokens (one chunk: R = 1 / 8 / 64), and the full
# section set of one R = 8 recurrence launch (stall reasons)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet 2>&1 | tail -1 | tee -a $L
NCU="ncu --clock-control none"
for n in 1 8 64; do
  T=$(seq -s, 101 $((100 + n)))
  timeout 120 $NCU --metrics gpu__time_duration.sum -k regex:'k_gdn_reg|k_conv_seqs' build/mtplx logits --device cuda --model /tmp/q27 --tokens $T --out /tmp/l.safetensors > /tmp/ncu-$n.txt 2>&1
  echo "== R=$n: $(grep -E 'k_gdn_reg|k_conv_seqs|gpu__time_duration' /tmp/ncu-$n.txt | awk '/k_gdn_reg/{k="gdn"} /k_conv_seqs/{k="conv"} /gpu__time_duration/{printf "%s %s %s; ", k, $(NF), $(NF-1)}' | cut -c1-700)" | tee -a $L
done
timeout 150 $NCU --set full -k regex:k_gdn_reg --launch-skip 2 --launch-count 1 build/mtplx logits --device cuda --model /tmp/q27 --tokens $(seq -s, 101 108) --out /tmp/l.safetensors > $OUT/ncu-full-gdn-r8.txt 2>&1
echo "full rc=$? $(el) s" | tee -a $L
timeout 100 $NCU --section SourceCounters --section WarpStateStats --import-source yes -k regex:k_gdn_reg --launch-skip 2 --launch-count 1 build/mtplx logits --device cuda --model /tmp/q27 --tokens $(seq -s, 101 108) --out /tmp/l.safetensors > $OUT/ncu-src-gdn-r8.txt 2>&1
echo "total $(el) s" | tee -a $L
