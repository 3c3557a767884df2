# session 43, call 10 (warm): the session's CUDA changes together (session43-src.patch = git diff c23f80c -- src)
# against session 42's tree, alternated on one machine: embedded bf16, T 0.6, AR / D3 / D8@0.4.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
P=bench/results/2026-12-07-gpu-s43/session43-src.patch
build() { scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }; }
build; cp build/mtplx build/mtplx-new; echo "[$(el) s] built new"
patch -R -p1 -s < $P && build && cp build/mtplx build/mtplx-old && patch -p1 -s < $P && echo "[$(el) s] built old"
B="--device cuda --prompts 8 --temperature 0.6 --max-tokens 256"
for r in 1 2 3; do
  for b in old new; do
    echo "== round $r $b" >> $OUT/bench.txt
    MTPLX_CUDA_STEPS=1 build/mtplx-$b bench $B --depths 0,3,8@0.4 >> $OUT/bench.txt 2>&1
  done
done
grep -E "^== |^(AR|D[0-9])|^ +1 +[0-9]+ " $OUT/bench.txt
cp build/mtplx-new build/mtplx
echo "[$(el) s] ALL DONE"
