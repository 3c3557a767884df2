# session 43, call 8: the draft step's second cut (draft-links2.patch: the fused attention prep's query and key heads
# side by side, the top-k histogram's atomics one a warp and bin, the MTP input's two norm sums with one set of barriers),
# bits and speed against the tree without it (HEAD: the attention cut of call 6), in one call. Outputs under $OUT.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
P=bench/results/2026-12-07-gpu-s43/draft-links2.patch
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
build() { scripts/device-build.sh build CUDA=1 model build/mtplx "$@" > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }; }
build build/tests/test_backend_cuda; cp build/mtplx build/mtplx-new; echo "[$(el) s] built new"
patch -R -p1 -s < $P && build && cp build/mtplx build/mtplx-old && patch -p1 -s < $P && echo "[$(el) s] built old"
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
  for b in old new; do
    echo "== round $r $b" >> $OUT/bench.txt
    MTPLX_CUDA_STEPS=1 build/mtplx-$b bench $B --depths 0,3,8@0.4 >> $OUT/bench.txt 2>&1
  done
done
grep -E "^== |^(AR|D[0-9])|^ +1 +[0-9]+ " $OUT/bench.txt
for b in old new; do
  ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum -k regex:"k_attn_core_seqs_fp|k_top_row|k_embed_norm_pair" --print-summary per-kernel \
    build/mtplx-$b bench --device cuda --prompts 1 --max-tokens 64 --repeats 1 --depths 8@0.4 --temperature 0.6 > $OUT/ncu-$b.txt 2>&1
  grep -A7 -E "^  .*(k_attn_core_seqs_fp|k_top_row|k_embed_norm_pair)" $OUT/ncu-$b.txt | grep -E "^  [a-z ]*k_|gpu__time" | paste - - | sed -E "s/\(.*\) \(/ (/; s/, Device.*Invocations/ n/" | awk '{print "'"$b"'", $0}' | tr -s " "
done
cp build/mtplx-new build/mtplx
echo "[$(el) s] ALL DONE"
