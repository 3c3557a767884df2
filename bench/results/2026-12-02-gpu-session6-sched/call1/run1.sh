#!/usr/bin/env bash
# helper sched, session 6, call 1: branch sched on the lead's tree; build; the embedded model through the
# scheduler with the old rendezvous (MTPLX_SCHED_ALIGN=0: every queued request in every step) and the new
# (one kind a step, drafts first); decode split; per-op profile; serve + streams both ways; test_sched on CUDA.
set -uo pipefail
git apply .gpu-sched/branch.patch || { echo "patch does not apply"; exit 1; }
touch src/engine/*.c src/model/*.c src/cli/*.c src/server/*.c
t0=$(date +%s)
scripts/device-build.sh build model build/mtplx build/tests/test_sched CUDA=1 > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; echo "FAIL build"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
export MTPLX_DEVICE=cuda
nproc; nvidia-smi --query-gpu=name --format=csv,noheader
P="--prompt-tokens 11,22,33,44,55,66,77,88 --max-tokens 128 --temperature 0.6 --top-k 20 --top-p 0.95 --seed 1"
r() { # r ALIGN SAMPLES DEPTH
  MTPLX_SCHED_ALIGN=$1 timeout 20 build/mtplx run --device cuda $P --depth $3 --samples $2 --parallel --max-seqs 64 --quiet 2>&1 >/tmp/o.txt | grep aggregate | sed "s/^/align $1 d$3: /"; echo "  text md5 $(md5sum < /tmp/o.txt)"
}
for rep in 1 2; do
  r 1 1 0; r 1 1 3
  for s in 8 16 64; do for d in 0 3; do for a in 0 1; do r $a $s $d; done; done; done
done > $OUT/run-ab.txt 2>&1
echo "run-ab done $(( $(date +%s) - t0 )) s"; grep -c aggregate $OUT/run-ab.txt
for a in 0 1; do for s in 1 8; do echo "+ MTPLX_TIMING align $a samples $s depth 3"
  MTPLX_SCHED_ALIGN=$a MTPLX_TIMING=1 timeout 20 build/mtplx run --device cuda $P --depth 3 --samples $s --parallel 2>&1 >/dev/null | grep -E "^\[decode|aggregate" | tail -3; done; done > $OUT/timing.txt 2>&1
for a in 0 1; do echo "+ profile align $a 8 samples depth 3"
  MTPLX_SCHED_ALIGN=$a MTPLX_CUDA_PROFILE=1 timeout 30 build/mtplx run --device cuda $P --depth 3 --samples 8 --parallel --quiet 2>&1 >/dev/null | tail -32; done > $OUT/profile.txt 2>&1
echo "profile done $(( $(date +%s) - t0 )) s"
serve_streams() { # serve_streams ALIGN
  MTPLX_SCHED_ALIGN=$1 build/mtplx serve --model models/qwen35-tiny-code --device cuda --port 0 --quiet --max-seqs 64 > /tmp/s.out 2>/tmp/s.err & local pid=$!
  local port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
  [ -n "$port" ] || { echo "serve did not start"; cat /tmp/s.err; kill $pid; return; }
  local U=http://127.0.0.1:$port
  echo "+ align $1: policy (knee 64)"; timeout 40 python3 bench/streams.py $U --streams 1,8,16 --max-tokens 256 --rounds 2
  echo "+ align $1: pinned 8 x D0, 8 x D3, 1 x D3"
  for x in "8 0" "8 3" "1 3"; do set -- $x; timeout 30 python3 bench/streams.py $U --streams $1 --depth $2 --max-tokens 256 --rounds 2 | tail -2; done
  curl -s $U/metrics | grep -E "^mtplx_(forward|batch|sched)" | head -8
  kill $pid; wait $pid
}
for a in 0 1; do serve_streams $a; done > $OUT/streams.txt 2>&1
echo "streams done $(( $(date +%s) - t0 )) s"
s=$(date +%s); timeout 60 build/tests/test_sched > $OUT/test_sched.txt 2>&1 && echo "PASS test_sched cuda ($(( $(date +%s) - s )) s)" || { echo "FAIL test_sched"; tail -15 $OUT/test_sched.txt; }
cat $OUT/run-ab.txt $OUT/timing.txt; cat $OUT/streams.txt | grep -v "^|---" ; echo "all done $(( $(date +%s) - t0 )) s"
