#!/usr/bin/env bash
# session 9 call 3 (lead): the small model (qwen35-small-code, real weights) on the GPU: issue 12's bars through
# serve (8 streams >= 4x one; p99 gap at 8 <= 3x one; a 4,000-token prompt's stall <= 5x the median, with
# the scheduler's step trace), its prefill, and llama.cpp CUDA beside it
set -uo pipefail
# (the llama.cpp peer's lines, which built and ran the fetched snapshot in /tmp on the device, are left out of
#  this copy: bench/cuda.md "Session 9" says what they did)
t0=$(date +%s); R=$PWD; L=$OUT/log.txt
mkdir -p /tmp/smx; cp .gpu-lead/smb/* /tmp/smx/; ls -la /tmp/smx >> $L
if [ ! -f /tmp/qwen35-small-code/config.json ]; then cat /tmp/smx/part-* | xz -dc | tar x -C /tmp || { echo "unpack failed"; exit 1; }; fi
[ -x build/mtplx ] || { echo "no build/mtplx (machine not warm?)"; exit 1; }
M=/tmp/qwen35-small-code; cp .gpu-lead/small-val_code.txt $M/val_code.txt
echo "+ MTP bench small"; timeout 40 build/mtplx bench --device cuda --model $M --prompts 8 --max-tokens 128 --depths 0,3,4 --temperature 0.6 2>&1 | tail -5 | tee -a $L
MTPLX_SCHED_TRACE=/tmp/trace.txt MTPLX_SCHED_VERBOSE=1 build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
[ -n "$port" ] || { echo "serve did not start"; cat /tmp/s.err; kill $pid; exit 1; }
U=http://127.0.0.1:$port
echo "+ policy 1,2,4,8,16"; timeout 60 python3 bench/streams.py $U --streams 1,2,4,8,16 --max-tokens 256 --rounds 2 2>&1 | tee $OUT/streams-policy.txt
for d in 3 4; do echo "+ 1 stream D$d"; timeout 20 python3 bench/streams.py $U --streams 1 --depth $d --max-tokens 256 --rounds 3 2>&1 | tail -3 | tee -a $OUT/streams-pinned.txt; done
for d in 0 3; do echo "+ 8 streams D$d"; timeout 20 python3 bench/streams.py $U --streams 8 --depth $d --max-tokens 256 --rounds 2 2>&1 | tail -2 | tee -a $OUT/streams-pinned.txt; done
echo "+ policy again 1,8"; timeout 30 python3 bench/streams.py $U --streams 1,8 --max-tokens 256 --rounds 2 2>&1 | tail -4 | tee -a $OUT/streams-policy.txt
echo "+ long prompt beside 4 streams"; n0=$(wc -l < /tmp/trace.txt)
timeout 40 python3 bench/streams.py $U --streams 4 --max-tokens 1024 --long-prompt 4000 --long-delay 0.05 --rounds 2 2>&1 | tail -2 | tee $OUT/long.txt
sleep 0.5; tail -n +$((n0 + 1)) /tmp/trace.txt > $OUT/trace-long.txt
kill $pid; wait $pid; grep -i "depth policy" /tmp/s.err | tee -a $L
echo "serve done at $(( $(date +%s) - t0 )) s" | tee -a $L
for p in 512 4096; do build/mtplx bench --device cuda --model $M --prefill $p 2>&1 | tail -1 | tee -a $L; done
true
echo "total $(( $(date +%s) - t0 )) s" | tee -a $L
