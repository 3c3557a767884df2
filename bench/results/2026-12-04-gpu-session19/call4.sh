#!/usr/bin/env bash
# session 19 call 4: the batched MTP step with its head behind the layer (one wait): unit tests on the
# GPU, then serve A/B on the embedded model (MTPLX_SCHED_MTP_HEAD=0 / 1)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_batch build/tests/test_sched build/tests/test_generate > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
for t in test_batch test_sched test_generate; do
  MTPLX_DEVICE=cuda build/tests/$t 2>&1 | tail -1 | tee -a $L
  MTPLX_DEVICE=cuda MTPLX_CUDA_TOP_MIN_VOCAB=1 build/tests/$t 2>&1 | tail -1 | tee -a $L
done
echo "tests $(el) s" | tee -a $L
ab() { # $1 model dir, $2 MTP_HEAD, $3 tag
  MTPLX_SCHED_MTP_HEAD=$2 MTPLX_SCHED_TRACE=/tmp/trace-$3.txt build/mtplx serve --model $1 --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
  port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
  U=http://127.0.0.1:$port; S="timeout 40 python3 bench/streams.py $U --max-tokens 1024"
  echo "+ $3 MTP_HEAD=$2: 1 stream D4 / 8 streams D3 / policy 1,8" | tee -a $L
  $S --streams 1 --depth 4 --rounds 2 --warmup 1 2>&1 | tail -1 | tee -a $L
  $S --streams 8 --depth 3 --rounds 2 2>&1 | tail -1 | tee -a $L
  $S --streams 1,8 --rounds 2 2>&1 | tail -2 | tee -a $L
  kill -INT $pid; wait $pid; cp /tmp/trace-$3.txt $OUT/
}
M=models/qwen35-tiny-code
ab $M 0 e0; ab $M 1 e1; ab $M 0 e0b; ab $M 1 e1b
echo "total $(el) s" | tee -a $L
