#!/usr/bin/env bash
# session 19 call 6: per-op GPU profiles after the batched MTP head (a979db1): trunk 5 rows (1 stream D4) vs 32 rows (8 streams D3), MTP steps 1 vs 8 sequences
# shape: acceptance ~0, so every MTP step has 1 row a sequence; trunk steps 4 rows a sequence at D3)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
M=/tmp/smsyn; rm -rf $M
build/mtplx synth --config bench/configs/qwen35-small-code.json --out $M --quiet
cp models/qwen35-tiny-code/{tokenizer_config.json,generation_config.json} $M/; for f in tokenizer.json val_code.txt; do xz -dc models/qwen35-tiny-code/$f.xz > $M/$f; done
prof() { # $1 streams, $2 profile rows, $3 tag
  MTPLX_CUDA_PROFILE=1 MTPLX_CUDA_PROFILE_ROWS=$2 MTPLX_SCHED_TRACE=/tmp/trace-$3.txt build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>$OUT/serve-$3.err & pid=$!
  port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
  U=http://127.0.0.1:$port
  timeout 60 python3 bench/streams.py $U --max-tokens 512 --streams $1 --depth 3 --rounds 2 --warmup 1 2>&1 | tail -2 | tee -a $L
  kill -INT $pid; wait $pid; echo "serve rc $?" | tee -a $L; cp /tmp/trace-$3.txt $OUT/
  grep -A20 "CUDA profile" $OUT/serve-$3.err | tee -a $L
}
prof4() { # $1 streams, $2 profile rows, $3 tag
  MTPLX_CUDA_PROFILE=1 MTPLX_CUDA_PROFILE_ROWS=$2 MTPLX_SCHED_TRACE=/tmp/trace-$3.txt build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>$OUT/serve-$3.err & pid=$!
  port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
  U=http://127.0.0.1:$port
  timeout 60 python3 bench/streams.py $U --max-tokens 512 --streams $1 --depth 4 --rounds 2 --warmup 1 2>&1 | tail -2 | tee -a $L
  kill -INT $pid; wait $pid; echo "serve rc $?" | tee -a $L; cp /tmp/trace-$3.txt $OUT/
  grep -A20 "CUDA profile" $OUT/serve-$3.err | tee -a $L
}
echo "== 1 stream D4, ops of 5-row forwards (trunk)" | tee -a $L; prof4 1 5 s1t
echo "== 8 streams D3, ops of 8-row forwards (MTP steps)" | tee -a $L; prof 8 8 s8; echo "== 1 stream D4, ops of 1-row forwards (MTP steps)" | tee -a $L; prof4 1 1 s1
echo "== 8 streams D3, ops of 32-row forwards (trunk)" | tee -a $L; prof 8 32 s8t
echo "total $(el) s" | tee -a $L
