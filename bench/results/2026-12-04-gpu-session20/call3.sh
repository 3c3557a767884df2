#!/usr/bin/env bash
# session 20 call 3: the U<=2 bf16 instance at 10 blocks an SM (a small model's gate + up fit as block
# rows at 32 rows): same bits (small shape logits, SK_RG=0/1/2/3), serve's trunk calibration RG=2 vs 1
# alternated, per-op profile of 32-row trunk forwards (8 streams D3, random small shape) RG=2 vs 1, gpu-test
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
M=/tmp/smsyn
rm -rf $M; build/mtplx synth --config bench/configs/qwen35-small-code.json --out $M --quiet
cp models/qwen35-tiny-code/{tokenizer_config.json,generation_config.json} $M/; for f in tokenizer.json val_code.txt; do xz -dc models/qwen35-tiny-code/$f.xz > $M/$f; done
echo "build + synth $(el) s" | tee -a $L
T=$(seq -s, 11 37 3674)
for g in 0 1 2 3; do for mode in "" "--mtp"; do
  MTPLX_CUDA_GEMM=0 MTPLX_CUDA_SK_RG=$g build/mtplx logits --model $M --tokens $T $mode --out /tmp/l$g$mode.st > /dev/null || echo "logits failed $g $mode" | tee -a $L
done; done
for mode in "" "--mtp"; do for g in 1 2 3; do
  cmp /tmp/l0$mode.st /tmp/l$g$mode.st && echo "smsyn logits [$mode] SK_RG=$g == 0" | tee -a $L || echo "DIFFER smsyn [$mode] SK_RG=$g" | tee -a $L
done; done
cal() { # $1 model, $2.. env
  local m=$1; shift
  env "$@" MTPLX_SCHED_VERBOSE=1 build/mtplx serve --model $m --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
  for _ in $(seq 1 300); do grep -q listening /tmp/s.out && break; sleep 0.1; done
  kill -INT $pid; wait $pid
  echo "$(basename $m) [$*] $(grep 'at start' /tmp/s.err | grep -E '4\+ rows|MTP step' | sed 's/.*depth policy at start: //; s/gap after.*//' | tr '\n' ' ')" | tee -a $L
}
for r in 1 2 3; do for g in 2 1; do cal $M MTPLX_CUDA_SK_RG=$g; done; done
prof() { # $1 SK_RG
  MTPLX_CUDA_SK_RG=$1 MTPLX_CUDA_PROFILE=1 MTPLX_CUDA_PROFILE_ROWS=32 build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/p.err & pid=$!
  port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
  timeout 60 python3 bench/streams.py http://127.0.0.1:$port --max-tokens 512 --streams 8 --depth 3 --rounds 2 --warmup 1 2>&1 | tail -1 | tee -a $L
  kill -INT $pid; wait $pid
  echo "== profile 32-row forwards SK_RG=$1" | tee -a $L; grep -A16 "CUDA profile" /tmp/p.err | tee -a $L
}
prof 2; prof 1
echo "bench $(el) s" | tee -a $L
timeout $(( 570 - $(el) )) bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | cut -c1-2000 | tee -a $L
