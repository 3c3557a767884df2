#!/usr/bin/env bash
# session 18 call C: a random-weight model at qwen35-small-code's shapes (its config.json): how a trunk
# forward's cost grows with rows (verify-cost 1..64, GEMM_MIN 48 / 16 / 8 alternated: same bits by
# design), and ncu per-kernel durations of a 4- and a 32-token forward
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
mkdir -p /tmp/smc && cp .gpu-lead/s18/small-config.json /tmp/smc/config.json
build/mtplx synth --config /tmp/smc/config.json --out /tmp/sm --quiet > $OUT/synth.txt 2>&1 || { cat $OUT/synth.txt; exit 1; }
cp models/qwen35-tiny-code/tokenizer* /tmp/sm/ 2>/dev/null
echo "build + synth $(el) s" | tee -a $L
for r in 1 2; do for g in 48 16 8; do
  echo "== GEMM_MIN=$g: $(MTPLX_CUDA_GEMM_MIN=$g timeout 60 build/mtplx bench --device cuda --model /tmp/sm --verify-cost --rows 64 --reps 5 --context 256 --logits-top 20 2>&1 | grep -E '^ +(1|4|8|12|16|24|32|48|64)-row forward' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|')" | tee -a $L
done; done
T4=100,2000,31,4096
T32=100,2000,31,4096,777,12,900,345,6789,21,1500,88,4321,600,7,2500,100,2000,31,4096,777,12,900,345,6789,21,1500,88,4321,600,7,2500
N="ncu --csv --print-units base --metrics gpu__time_duration.sum --cache-control none --clock-control none"
for t in 4 32; do
  eval tok=\$T$t
  timeout 100 $N build/mtplx logits --device cuda --model /tmp/sm --tokens $tok --out /tmp/l.safetensors > $OUT/ncu-$t.csv 2>&1
  python3 .gpu-lead/s18/ncusum.py $OUT/ncu-$t.csv | tee -a $L
done
echo "total $(el) s" | tee -a $L
