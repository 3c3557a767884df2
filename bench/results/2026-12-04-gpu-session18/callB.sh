#!/usr/bin/env bash
# session 18 call B: the small model (qwen35-small-code, real weights; its xz'd tar in two halves, call A
# left the first in /tmp/smx) on HEAD: single-stream MTP bench, then serve + streams (issue 12's bars:
# 8 streams >= 4x the best single stream; p99 gap at 8 <= 3x one); then HEAD vs bfc3ade (two waits) on
# the single-stream bench
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
mkdir -p /tmp/smx; cp .gpu-lead/smb/* /tmp/smx/; ls -la /tmp/smx > $OUT/parts.txt
(cat /tmp/smx/part00 /tmp/smx/part01 | xz -dc -T4 | tar x -C /tmp) & up=$!
scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
cp build/mtplx /tmp/mtplx-head
wait $up || { echo "unpack failed"; exit 1; }
M=/tmp/qwen35-small-code; ls $M > $OUT/model-files.txt
echo "build + unpack $(el) s" | tee -a $L
echo "+ MTP bench small" | tee -a $L; timeout 60 build/mtplx bench --device cuda --model $M --prompts 8 --max-tokens 128 --depths 0,2,3,4 --temperature 0.6 2>&1 | tail -7 | tee -a $L
MTPLX_SCHED_VERBOSE=1 build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
[ -n "$port" ] || { echo "serve did not start"; cat /tmp/s.err; kill $pid; exit 1; }
U=http://127.0.0.1:$port
echo "+ policy 1,2,4,8,16" | tee -a $L; timeout 60 python3 bench/streams.py $U --streams 1,2,4,8,16 --max-tokens 256 --rounds 2 2>&1 | tee $OUT/streams-policy.txt | tee -a $L
for d in 2 3 4; do echo "+ 1 stream D$d" | tee -a $L; timeout 20 python3 bench/streams.py $U --streams 1 --depth $d --max-tokens 256 --rounds 3 2>&1 | tail -3 | tee -a $OUT/streams-pinned.txt | tee -a $L; done
for d in 0 1 3; do echo "+ 8 streams D$d" | tee -a $L; timeout 20 python3 bench/streams.py $U --streams 8 --depth $d --max-tokens 256 --rounds 2 2>&1 | tail -2 | tee -a $OUT/streams-pinned.txt | tee -a $L; done
echo "+ policy again 1,8" | tee -a $L; timeout 30 python3 bench/streams.py $U --streams 1,8 --max-tokens 256 --rounds 3 2>&1 | tail -6 | tee -a $OUT/streams-policy.txt | tee -a $L
kill $pid; wait $pid; grep -i "depth policy" /tmp/s.err | tee $OUT/policy.txt | tee -a $L
echo "serve done $(el) s" | tee -a $L
if [ $(el) -lt 380 ]; then
  patch -R -p1 < .gpu-lead/s18/keep.patch > /dev/null && patch -R -p1 < .gpu-lead/s18/onewait.patch > /dev/null &&
    scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build0.txt 2>&1 && cp build/mtplx /tmp/mtplx-v0
  for r in 1 2; do for v in v0 head; do
    echo "== small $v: $(/tmp/mtplx-$v bench --device cuda --model $M --prompts 8 --max-tokens 128 --depths 0,3 --temperature 0.6 2>&1 | grep -E '^(AR|D3) ' | awk '{print $1, $2, "verify", $7, "draft", $6}' | tr '\n' '|')" | tee -a $L
  done; done
fi
echo "total $(el) s" | tee -a $L
