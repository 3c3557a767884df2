#!/usr/bin/env bash
# session 19 call 7: what a many-row trunk forward costs under the matmul knobs (serve's start-up
# calibration: trunk ms at 4 rows a sequence x 1/2/4/8 sequences), random small shape and embedded
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
M=/tmp/smsyn
if [ ! -f $M/tokenizer.json ]; then rm -rf $M; build/mtplx synth --config bench/configs/qwen35-small-code.json --out $M --quiet
cp models/qwen35-tiny-code/{tokenizer_config.json,generation_config.json} $M/; for f in tokenizer.json val_code.txt; do xz -dc models/qwen35-tiny-code/$f.xz > $M/$f; done; fi
cal() { # $1 model, $2.. env
  local m=$1; shift
  env "$@" MTPLX_SCHED_VERBOSE=1 build/mtplx serve --model $m --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
  for _ in $(seq 1 300); do grep -q listening /tmp/s.out && break; sleep 0.1; done
  kill -INT $pid; wait $pid
  echo "$(basename $m) [$*] $(grep 'at start' /tmp/s.err | grep -E '4\+ rows|8\+ rows|MTP step' | sed 's/.*depth policy at start: //' | tr '\n' ' ')" | tee -a $L
}
for m in $M models/qwen35-tiny-code; do
  for r in 1 2; do
    cal $m X=1; cal $m MTPLX_CUDA_SK_BU=4; cal $m MTPLX_CUDA_SK_BU=2; cal $m MTPLX_CUDA_SK_RG=0; cal $m MTPLX_CUDA_SK=0
  done
done
for R in 4 8 16 32; do for s in 1920x640 640x1920 1536x640; do
  echo "bf16 $s R=$R: $(build/mtplx bench --matmul bf16 --shape $s --count 1 --rows $R --reps 9 2>&1 | tail -1)" | tee -a $L
done; done
echo "total $(( $(date +%s)-t0 )) s" | tee -a $L
