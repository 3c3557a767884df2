#!/usr/bin/env bash
# session 18 call B2: the small model (real weights, carried in two halves as calls A / B) on the final
# HEAD (one wait per draft step, draft rows kept, row groups side by side, small weights on stream-K to 127
# rows): single-stream bench, serve streams (issue 12's 8-stream bar), prefill 48..128 rows against the old
# GEMM rule (MTPLX_CUDA_GEMM_MIN=48); then gpu-test
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
mkdir -p /tmp/smx; cp .gpu-lead/smb/* /tmp/smx/
(cat /tmp/smx/part00 /tmp/smx/part01 | xz -dc -T4 | tar x -C /tmp) & up=$!
scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
wait $up || { echo "unpack failed"; exit 1; }
M=/tmp/qwen35-small-code
echo "build + unpack $(el) s" | tee -a $L
echo "+ MTP bench small" | tee -a $L; timeout 60 build/mtplx bench --device cuda --model $M --prompts 8 --max-tokens 128 --depths 0,2,3,4 --temperature 0.6 2>&1 | tail -6 | tee -a $L
MTPLX_SCHED_VERBOSE=1 build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
[ -n "$port" ] || { echo "serve did not start"; cat /tmp/s.err; kill $pid; exit 1; }
U=http://127.0.0.1:$port
echo "+ policy 1,2,4,8,16" | tee -a $L; timeout 60 python3 bench/streams.py $U --streams 1,2,4,8,16 --max-tokens 256 --rounds 2 2>&1 | tee -a $L
for d in 3 4; do echo "+ 1 stream D$d" | tee -a $L; timeout 20 python3 bench/streams.py $U --streams 1 --depth $d --max-tokens 256 --rounds 3 2>&1 | tail -3 | tee -a $L; done
for d in 1 3; do echo "+ 8 streams D$d" | tee -a $L; timeout 20 python3 bench/streams.py $U --streams 8 --depth $d --max-tokens 256 --rounds 2 2>&1 | tail -2 | tee -a $L; done
echo "+ policy again 1,8" | tee -a $L; timeout 30 python3 bench/streams.py $U --streams 1,8 --max-tokens 256 --rounds 3 2>&1 | tail -6 | tee -a $L
kill $pid; wait $pid; grep -i "depth policy" /tmp/s.err | tee -a $L
echo "total $(el) s" | tee -a $L
