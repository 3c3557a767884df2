#!/usr/bin/env bash
# helper sched, session 6, call 2: branch sched on the lead's tree; build; embedded model:
# (A) run --parallel old (MTPLX_SCHED_ALIGN=0) / new / new + MTPLX_SCHED_SPIN_US=50, with the split of
#     the wall time (trunk / MTP steps / between steps); (B) serve + streams: old (align 0, knee 64),
#     new with the measured depth policy (MTPLX_SCHED_VERBOSE=1 prints the costs), new + spin, new with
#     knee 64; (C) prefill speed; (D) test_sched / test_sched_cost / test_batch on CUDA.
set -uo pipefail
git apply .gpu-sched/branch.patch || { echo "patch does not apply"; exit 1; }
touch src/engine/*.c src/model/*.c src/cli/*.c src/server/*.c
t0=$(date +%s)
scripts/device-build.sh build model build/mtplx build/tests/test_sched build/tests/test_sched_cost build/tests/test_batch CUDA=1 > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; echo "FAIL build"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
export MTPLX_DEVICE=cuda
P="--prompt-tokens 11,22,33,44,55,66,77,88 --max-tokens 128 --temperature 0.6 --top-k 20 --top-p 0.95 --seed 1"
r() { # r TAG SAMPLES DEPTH ENV...
  local tag=$1 s=$2 d=$3; shift 3
  env "$@" timeout 20 build/mtplx run --device cuda $P --depth $d --samples $s --parallel --max-seqs 64 --quiet 2>&1 >/tmp/o.txt | grep aggregate | sed "s/^/$tag s$s d$d: /"; echo "  text md5 $(md5sum < /tmp/o.txt)"
}
for rep in 1 2; do
  r new 1 0 X=1; r new 1 3 X=1; r spin 1 3 MTPLX_SCHED_SPIN_US=50
  for s in 8 16 64; do
    r old $s 3 MTPLX_SCHED_ALIGN=0; r new $s 3 X=1; r spin $s 3 MTPLX_SCHED_SPIN_US=50
    r new $s 0 X=1; r spin $s 0 MTPLX_SCHED_SPIN_US=50
  done
done > $OUT/run-ab.txt 2>&1
echo "run-ab done $(( $(date +%s) - t0 )) s"
serve_streams() { # serve_streams TAG STREAMS ENV... -- SERVE_ARGS...
  local tag=$1 streams=$2; shift 2; local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" MTPLX_SCHED_VERBOSE=1 build/mtplx serve --model models/qwen35-tiny-code --device cuda --port 0 --quiet --max-seqs 64 "$@" > /tmp/s.out 2>/tmp/s.err & local pid=$!
  local port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
  [ -n "$port" ] || { echo "serve did not start"; cat /tmp/s.err; kill $pid; return; }
  local U=http://127.0.0.1:$port
  echo "+ $tag: policy, cold prompts"; cat /tmp/s.err; timeout 40 python3 bench/streams.py $U --streams $streams --max-tokens 256 --rounds 2
  echo "+ $tag: pinned 8 x D0, 8 x D3, 1 x D3, 1 x D0 (cached prompts)"
  for x in "8 0" "8 3" "1 3" "1 0"; do set -- $x; timeout 30 python3 bench/streams.py $U --streams $1 --depth $2 --max-tokens 256 --rounds 2 | tail -2; done
  echo "+ $tag: policy again, 8 streams (cached prompts)"; timeout 30 python3 bench/streams.py $U --streams 8 --max-tokens 256 --rounds 2 | tail -2
  kill $pid; wait $pid
}
serve_streams old 1,8,16 MTPLX_SCHED_ALIGN=0 -- --knee-rows 64 > $OUT/streams-old.txt 2>&1
serve_streams new 1,2,4,8,16 X=1 -- > $OUT/streams-new.txt 2>&1
serve_streams spin 1,8,16 MTPLX_SCHED_SPIN_US=50 -- > $OUT/streams-spin.txt 2>&1
serve_streams knee64 1,8,16 X=1 -- --knee-rows 64 > $OUT/streams-knee64.txt 2>&1
echo "streams done $(( $(date +%s) - t0 )) s"
for n in 200 1600; do timeout 30 build/mtplx bench --device cuda --prefill $n --model models/qwen35-tiny-code 2>&1 | tail -2; done > $OUT/prefill.txt 2>&1
for t in test_sched_cost test_sched test_batch; do s=$(date +%s); timeout 60 build/tests/$t > $OUT/$t.txt 2>&1 && echo "PASS $t cuda ($(( $(date +%s) - s )) s)" || { echo "FAIL $t"; tail -15 $OUT/$t.txt; }; done
cat $OUT/run-ab.txt; for f in old new spin knee64; do grep -v "^|---" $OUT/streams-$f.txt; done; cat $OUT/prefill.txt; echo "all done $(( $(date +%s) - t0 )) s"
