# session 43, call 11 (the last device minutes): the 8,192-id top k as 1,024 threads of 8 keys (was 512 of 16) and
# k_attn_core_seqs / _fp folded onto one block body (top1024-fold.patch): bits against the tree without it,
# test_backend_cuda, and ncu of k_top_row old / new. Outputs under $OUT.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
P=bench/results/2026-12-07-gpu-s43/top1024-fold.patch
build() { scripts/device-build.sh build CUDA=1 model build/mtplx "$@" > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }; }
build build/tests/test_backend_cuda; cp build/mtplx build/mtplx-new; echo "[$(el) s] built new"
patch -R -p1 -s < $P && build && cp build/mtplx build/mtplx-old && patch -p1 -s < $P && echo "[$(el) s] built old"
T=$(seq -s, 100 7 4300)
for b in old new; do
  for mode in "" "--step" "--step --mtp"; do
    build/mtplx-$b logits --tokens $T $mode --out /tmp/l-$b-${mode// /}.st > /dev/null || echo "logits $b [$mode] failed"
  done
  build/mtplx-$b run --prompt "def fib(n):" --max-tokens 300 --depth 8 --draft-min-conf 0.4 --temperature 0.6 --seed 3 > /tmp/u-$b.txt 2>/dev/null
  build/mtplx-$b run --prompt "def fib(n):" --max-tokens 300 --depth 3 --draft-min-conf 0 --temperature 0.9 --seed 5 > /tmp/t-$b.txt 2>/dev/null
done
ok=1
for mode in "" "--step" "--step--mtp"; do cmp /tmp/l-old-$mode.st /tmp/l-new-$mode.st && echo "logits [$mode] identical" || ok=0; done
cmp /tmp/t-old.txt /tmp/t-new.txt && echo "D3 T0.9 text identical" || ok=0
cmp /tmp/u-old.txt /tmp/u-new.txt && echo "D8@0.4 text identical" || ok=0
echo "[$(el) s] bits ok=$ok" | tee $OUT/bits.txt
timeout 120 build/tests/test_backend_cuda > $OUT/test_backend_cuda.txt 2>&1; echo "[$(el) s] test_backend_cuda: $(tail -1 $OUT/test_backend_cuda.txt)"
for b in old new; do
  ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum -k regex:"k_top_row|k_attn_core_seqs" --print-summary per-kernel \
    build/mtplx-$b bench --device cuda --prompts 1 --max-tokens 64 --repeats 1 --depths 8@0.4 --temperature 0.6 > $OUT/ncu-$b.txt 2>&1
  grep -A7 -E "^  .*(k_top_row|k_attn_core_seqs)" $OUT/ncu-$b.txt | grep -E "^  [a-z ]*k_|gpu__time" | paste - - | sed -E "s/\(.*\) \(/ (/; s/, Device.*Invocations/ n/" | awk '{print "'"$b"'", $0}' | tr -s " " | head -8
done
echo "[$(el) s] ALL DONE"
