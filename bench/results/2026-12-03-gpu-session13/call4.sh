#!/usr/bin/env bash
# (the knobs MTPLX_CUDA_SK_RING / MTPLX_CUDA_SK_DB these calls compared existed only in the tree of that call:
# the kernels behind them were slower or level and were not committed; bench/cuda.md "Session 13")
# session 13 call 4 (lead), HEAD (the ring kernels reverted): is the stream-K matmul's read rate set by
# where its rows lie? (the same bytes as 16-row tiles of 1 KB rows, of 10 KB rows and of 80 KB rows);
# the embedded model through serve (1..16 streams, a 4,000-token prompt beside 4) and its prefill after
# the attention rewrite; 27B-16l bf16 / q4 AR and D3 (acceptance 0) through `run`, T 0.6 top-k 20; and
# MTPLX_CUDA_SK_DB=1 (two register batches, the next one's loads issued before this one is computed)
# against the default: its tests (bit identity), the matmul alone, 27B AR + verify
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build model build/mtplx build/tests/test_backend_cuda build/tests/test_batch build/tests/test_rows CUDA=1 > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "build $(el) s" | tee -a $L
(timeout 150 build/mtplx synth --preset qwen35-27b-16l --dtype q4 --out /tmp/q27 --quiet > /tmp/synth27.txt 2>&1;
 timeout 150 build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out /tmp/b27 --quiet >> /tmp/synth27.txt 2>&1) &
for t in test_backend_cuda test_batch test_rows; do MTPLX_DEVICE=cuda MTPLX_CUDA_SK_DB=1 timeout 60 build/tests/$t > /tmp/$t.txt 2>&1; echo "DB=1 $t rc=$? $(grep -ciE '^FAIL' /tmp/$t.txt) FAIL lines"; done | tee -a $L
P='def quicksort(arr):'
for d in 0 3; do MTPLX_CUDA_SK_DB=1 build/mtplx run --device cuda --prompt "$P" --max-tokens 64 --temperature 0 --depth $d --quiet > /tmp/db-d$d.txt 2>&1; done
cmp -s /tmp/db-d0.txt /tmp/db-d3.txt && echo "DB=1 greedy D3 == AR" | tee -a $L || echo "DB=1 greedy D3 != AR" | tee -a $L
for k in 1 2; do for db in 1 0; do for f in bf16:4 q4:16 q8:8; do
  echo "== DB $db matmul ${f%%:*}: $(MTPLX_CUDA_SK_DB=$db timeout 40 build/mtplx bench --device cuda --matmul ${f%%:*} --shape 17408x5120 --count ${f##*:} --rows 8 --reps 5 2>&1 | grep -E 'T=(1|4|8) ' | tr -s ' ' | tr '\n' '|')"
done; done; done | tee -a $L
for f in bf16:4 q4:16; do for sh in 174080x512 17408x5120 2176x40960; do
  echo "== matmul ${f%%:*} $sh x ${f##*:}: $(timeout 40 build/mtplx bench --device cuda --matmul ${f%%:*} --shape $sh --count ${f##*:} --rows 2 --reps 5 2>&1 | grep -E 'T=' | tr -s ' ' | tr '\n' '|')"
done; done | tee -a $L
echo "matmul $(el) s" | tee -a $L
for p in 512 4096; do echo "== emb prefill $p: $(timeout 30 build/mtplx bench --device cuda --prefill $p 2>&1 | tail -1)"; done | tee -a $L
MTPLX_SCHED_TRACE=/tmp/trace.txt build/mtplx serve --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
if [ -n "$port" ]; then
  U=http://127.0.0.1:$port
  echo "+ policy 1,2,4,8,16"; timeout 60 python3 bench/streams.py $U --streams 1,2,4,8,16 --max-tokens 256 --rounds 2 2>&1 | tail -12 | tee -a $L
  echo "+ long prompt beside 4 streams"
  timeout 60 python3 bench/streams.py $U --streams 4 --max-tokens 1024 --long-prompt 4000 --long-delay 0.05 --rounds 2 2>&1 | tail -3 | tee -a $L
  kill $pid; wait $pid; grep -i "depth policy" /tmp/s.err | tee -a $L
else echo "serve did not start"; cat /tmp/s.err; kill $pid; fi
echo "serve $(el) s" | tee -a $L
wait; tail -2 /tmp/synth27.txt | tee -a $L
S="--temperature 0.6 --top-k 20 --top-p 0.95"
for m in b27 q27; do for d in 0 3 0 3; do echo "== $m D$d: $(timeout 60 build/mtplx run --device cuda --model /tmp/$m --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 300 --depth $d $S 2>&1 | tail -1 | cut -c1-150)"; done; done | tee -a $L
for m in /tmp/q27 /tmp/b27; do [ -f $m/config.json ] || continue; for db in 1 0; do
  echo "== DB $db $m: $(MTPLX_CUDA_SK_DB=$db timeout 100 build/mtplx bench --device cuda --model $m --membw --verify-cost --rows 4 --reps 5 --context 512 --logits-top 20 2>&1 | grep -E 'row forward|AR decode|GB/s' | tr -s ' ' | tr '\n' '|' | cut -c1-500)"
done; done | tee -a $L
echo "total $(el) s" | tee -a $L
