#!/usr/bin/env bash
# session 18 call E: bf16 stream-K row groups in block rows (MTPLX_CUDA_SK_RG=1, new) vs in each warp (=0):
# small-shape random model verify cost 1..32 rows, serve's trunk calibration, embedded bench; GEMM vs
# stream-K passes for small-shape prefill; gpu-test
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
mkdir -p /tmp/smc && cp .gpu-lead/s18/small-config.json /tmp/smc/config.json
build/mtplx synth --config /tmp/smc/config.json --out /tmp/sm --quiet > $OUT/synth.txt 2>&1 || { cat $OUT/synth.txt; exit 1; }
echo "build + synth $(el) s" | tee -a $L
for r in 1 2; do for g in 0 1; do
  echo "== sm SK_RG=$g: $(MTPLX_CUDA_SK_RG=$g timeout 60 build/mtplx bench --device cuda --model /tmp/sm --verify-cost --rows 32 --reps 5 --context 256 --logits-top 20 2>&1 | grep -E ' (1|4|8|12|16|24|32)-row forward' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|')" | tee -a $L
done; done
for g in 0 1; do
  MTPLX_CUDA_SK_RG=$g MTPLX_SCHED_VERBOSE=1 build/mtplx serve --model /tmp/sm --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
  for _ in $(seq 1 300); do grep -q "drafts (at most 3)" /tmp/s.err && break; sleep 0.1; done
  kill $pid; wait $pid 2>/dev/null
  echo "== serve calibration SK_RG=$g:" | tee -a $L; grep "depth policy" /tmp/s.err | sed 's/mtplx serve: depth policy: //' | tee -a $L
done
B="bench --device cuda --depths 0,3 --temperature 0.6 --prompts 8"
for r in 1 2; do for g in 0 1; do
  echo "== emb SK_RG=$g: $(MTPLX_CUDA_SK_RG=$g build/mtplx $B 2>&1 | grep -E '^(AR|D3) ' | awk '{print $1, $2, "verify", $7, "draft", $6}' | tr '\n' '|')" | tee -a $L
done; done
for n in 48 64 128 256 512; do
  echo "== sm prefill $n GEMM default / off: $(build/mtplx bench --device cuda --model /tmp/sm --prefill $n --reps 3 2>&1 | tail -1) / $(MTPLX_CUDA_GEMM=0 build/mtplx bench --device cuda --model /tmp/sm --prefill $n --reps 3 2>&1 | tail -1)" | tee -a $L
done
echo "bench $(el) s" | tee -a $L
timeout $(( 560 - $(el) )) bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | cut -c1-2000 | tee -a $L
