#!/usr/bin/env bash
# session 17 call 2: per-kernel GPU durations in steady state (nsys), embedded model 1-row and 4-row
# forwards and the 27B-16l q4 1-row step, eager (graphs off)
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
which nsys ncu compute-sanitizer | tee -a $L
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth.txt 2>&1) &
NS=$(which nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: $NS" | tee -a $L
prof() { # prof NAME CMD...
  local n=$1; shift
  timeout 120 $NS profile -t cuda --cuda-graph-trace=node -o /tmp/$n -f true "$@" > $OUT/$n-run.txt 2>&1
  timeout 120 $NS stats -r cuda_gpu_kern_sum,cuda_api_sum -f csv -o $OUT/$n /tmp/$n.nsys-rep > /dev/null 2>&1
  timeout 120 $NS stats -r cuda_gpu_trace -f csv -o /tmp/$n /tmp/$n.nsys-rep > /dev/null 2>&1
  tail -n 400 /tmp/${n}_cuda_gpu_trace.csv > $OUT/$n-trace-tail.csv
  ls $OUT | tee -a $L
}
prof emb-r1 build/mtplx bench --device cuda --verify-cost --rows 1 --reps 201 --context 64
prof emb-d3 build/mtplx bench --device cuda --depths 3 --temperature 0.6 --prompts 4 --repeats 1
wait; tail -n1 /tmp/synth.txt | tee -a $L
prof q27-r1 build/mtplx bench --device cuda --model /tmp/q27 --verify-cost --rows 1 --reps 21 --context 512 --logits-top 20
echo "done $(el) s" | tee -a $L
