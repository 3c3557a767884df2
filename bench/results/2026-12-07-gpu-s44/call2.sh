# session 44, call 2: (1) the GDN register step loads a chunk's inputs together (gdn-batch.patch: q / k / gates of up
# to 4 rows a warp before any is normalised, the chunk's value inputs and z gates staged in shared memory; k_conv_seqs'
# rows loaded before the window is written, 8 at once); (2) the
# top-k histogram in 8 bank-spread copies, value bits from the keys (top-hist.patch). Bits and speed against the tree
# without them, in one call. Outputs under $OUT.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
P="bench/results/2026-12-07-gpu-s44/gdn-batch.patch bench/results/2026-12-07-gpu-s44/top-hist.patch"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
build() { scripts/device-build.sh build CUDA=1 model build/mtplx "$@" > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }; }
build build/tests/test_backend_cuda; cp build/mtplx build/mtplx-new; echo "[$(el) s] built new"
for p in $P; do patch -R -p1 -s < $p || exit 1; done; build && cp build/mtplx build/mtplx-old && for p in $P; do patch -p1 -s < $p; done && echo "[$(el) s] built old"
T=$(seq -s, 100 7 4300)
for b in old new; do
  for mode in "" "--step" "--step --mtp"; do
    build/mtplx-$b logits --tokens $T $mode --out /tmp/l-$b-${mode// /}.st > /dev/null || echo "logits $b [$mode] failed"
  done
  build/mtplx-$b run --prompt "def fib(n):" --max-tokens 300 --depth 3 --draft-min-conf 0 --temperature 0.7 --seed 9 > /tmp/t-$b.txt 2>/dev/null
  build/mtplx-$b run --prompt "def fib(n):" --max-tokens 300 --depth 8 --draft-min-conf 0.4 --temperature 0.6 --seed 3 > /tmp/u-$b.txt 2>/dev/null
done
for f in l--.st l---step.st l---step--mtp.st; do :; done
ok=1
for mode in "" "--step" "--step--mtp"; do cmp /tmp/l-old-$mode.st /tmp/l-new-$mode.st && echo "logits [600 tokens $mode] identical" || ok=0; done
cmp /tmp/t-old.txt /tmp/t-new.txt && echo "D3 sampled text identical" || ok=0
cmp /tmp/u-old.txt /tmp/u-new.txt && echo "D8@0.4 sampled text identical" || ok=0
echo "[$(el) s] bits ok=$ok" | tee $OUT/bits.txt
timeout 300 build/tests/test_backend_cuda > $OUT/test_backend_cuda.txt 2>&1; echo "[$(el) s] test_backend_cuda rc=$?: $(tail -1 $OUT/test_backend_cuda.txt)"
B="--device cuda --prompts 8 --temperature 0.6 --max-tokens 256"
for r in 1 2 3; do
  [ $(el) -lt 400 ] || { echo "round $r skipped: $(el) s" >> $OUT/bench.txt; break; }
  for b in old new; do
    echo "== round $r $b" >> $OUT/bench.txt
    MTPLX_CUDA_STEPS=1 build/mtplx-$b bench $B --depths 0,3,8@0.4 >> $OUT/bench.txt 2>&1
  done
done
echo "== new, MTPLX_CUDA_GDN_SPLIT=1 (verify heads fused: one block a head, norm inside)" >> $OUT/bench.txt
MTPLX_CUDA_GDN_SPLIT=1 MTPLX_CUDA_STEPS=1 build/mtplx-new bench $B --depths 0,3,8@0.4 >> $OUT/bench.txt 2>&1
grep -E "^== |^(AR|D[0-9])|^ +1 +[0-9]+ " $OUT/bench.txt
for b in old new; do
  [ $(el) -lt 520 ] || { echo "ncu $b skipped: $(el) s"; continue; }
  ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum -k regex:"k_gdn_reg_seqs|k_gdn_norm_seqs|k_top_row|k_conv_seqs" --print-summary per-kernel \
    build/mtplx-$b bench --device cuda --prompts 1 --max-tokens 64 --repeats 1 --depths 8@0.4 --temperature 0.6 > $OUT/ncu-$b.txt 2>&1
  grep -A7 -E "^  .*(k_gdn_reg_seqs|k_gdn_norm_seqs|k_top_row|k_conv_seqs)" $OUT/ncu-$b.txt | grep -E "^  [a-z ]*k_|gpu__time" | paste - - | sed -E "s/\(.*\) \(/ (/; s/, Device.*Invocations/ n/" | awk '{print "'"$b"'", $0}' | tr -s " "
done
cp build/mtplx-new build/mtplx
echo "[$(el) s] ALL DONE"
