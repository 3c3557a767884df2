#!/usr/bin/env bash
# helper cudalat, device call 2 (session 7): base (main as sent, /tmp/base) vs branch: the embedded
# model (bench --depths 0,3; 8 parallel samples at depth 3, seeds 1 and 2) alternated twice; the top-k
# path forced on; the branch's knobs one at a time; per-op profiles and step tables; then the 27B-16l
# q4 step with the knobs and the bf16 step base vs branch.
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
G=.gpu-cudalat
rm -rf /tmp/base && mkdir -p /tmp/base
tar --exclude=./build --exclude='./.gpu-*' -cf - . | tar -xf - -C /tmp/base
mkdir -p /tmp/base/build && cp -a build/device-debs /tmp/base/build/
git apply $G/branch.patch || { echo PATCH FAILED; exit 1; }
find src tests -name '*.c' -o -name '*.cu' -o -name '*.h' -o -name '*.cuh' | xargs touch
( cd /tmp/base && scripts/device-build.sh build model build/mtplx CUDA=1 > $OUT/base-build.log 2>&1; echo "base build rc $? at $(el) s" >> $OUT/base-build.log ) &
BP=$!
scripts/device-build.sh build model build/mtplx CUDA=1 > $OUT/build.log 2>&1; echo "build rc $? at $(el) s"
wait $BP; tail -1 $OUT/base-build.log
B=/tmp/base/build/mtplx M=build/mtplx S=/tmp/s; mkdir -p $S
for f in q4 bf16; do ( nice -n 10 $M synth --preset qwen35-27b-16l --dtype $f --out $S/$f --quiet; echo "$f synth done at $(el) s" ) > $OUT/synth-$f.log 2>&1 & done
export MTPLX_DEVICE=cuda
bin() { [ $1 = new ] && echo $M || echo $B; }
EMB() { local w=$1; shift; echo "== emb $w $* $(el) s"; env "$@" timeout 15 $(bin $w) bench --device cuda --depths 0,3 2>&1 | grep -E "^(AR|D3) |rror|^mtplx"; }
PAR() { local w=$1 s=$2; shift 2; echo "== par8 $w seed $s $* $(el) s"; env "$@" timeout 12 $(bin $w) run --device cuda --prompt "def fib(n):" --samples 8 --parallel --depth 3 --max-tokens 128 --temperature 0.6 --seed $s 2>&1 | grep -E "aggregate|rror|^mtplx"; }
{ EMB new X=1; EMB base X=1; EMB new X=1; EMB base X=1; } 2>&1 | tee $OUT/emb.txt
{ for s in 1 2; do PAR new $s X=1; PAR base $s X=1; PAR new $s X=1; PAR base $s X=1; done; } 2>&1 | tee $OUT/par8.txt
{ EMB new MTPLX_CUDA_TOP_MIN_VOCAB=1; EMB base MTPLX_CUDA_TOP_MIN_VOCAB=1; EMB new MTPLX_CUDA_TOP_MIN_VOCAB=1; EMB base MTPLX_CUDA_TOP_MIN_VOCAB=1
  PAR new 1 MTPLX_CUDA_TOP_MIN_VOCAB=1; PAR base 1 MTPLX_CUDA_TOP_MIN_VOCAB=1; } 2>&1 | tee $OUT/top.txt
{ for k in MTPLX_CUDA_GDN_L2=0 MTPLX_CUDA_SEQ_INLINE=0 MTPLX_CUDA_RMS_THREADS=256 MTPLX_CUDA_UP_ASYNC=0 MTPLX_CUDA_DL_PIPE=0 X=1; do EMB new $k; done
  for k in MTPLX_CUDA_GDN_L2=0 MTPLX_CUDA_SEQ_INLINE=0 MTPLX_CUDA_UP_ASYNC=0 X=1; do PAR new 1 $k; done; } 2>&1 | tee $OUT/knobs.txt
for w in new base; do
  MTPLX_CUDA_PROFILE=2 timeout 10 $(bin $w) bench --device cuda --verify-cost --rows 1 --reps 21 --context 16 > $OUT/prof-emb-r1-$w.txt 2>&1
  MTPLX_CUDA_PROFILE=1 timeout 10 $(bin $w) run --device cuda --prompt "def fib(n):" --samples 8 --parallel --depth 3 --max-tokens 128 --temperature 0.6 --seed 1 > $OUT/prof-emb-par8-$w.txt 2>&1
  MTPLX_CUDA_STEPS=1 timeout 10 $(bin $w) bench --device cuda --verify-cost --rows 1 --reps 21 --context 16 > $OUT/steps-emb-$w.txt 2>&1
done
echo "embedded done $(el) s"
AR() { local w=$1 f=$2; shift 2; echo "== $w $f $* $(el) s"; env "$@" timeout 15 $(bin $w) bench --device cuda --membw --verify-cost --rows 1 --reps 7 --context 512 --model $S/$f 2>&1 | grep -E "1-row|AR decode|rror"; }
while ! grep -q "done" $OUT/synth-q4.log && [ $(el) -lt 140 ]; do sleep 1; done; cat $OUT/synth-q4.log
[ -f $S/q4/config.json ] && { for k in X=1 MTPLX_CUDA_GDN_L2=0 MTPLX_CUDA_SEQ_INLINE=0 MTPLX_CUDA_RMS_THREADS=256 X=1; do AR new q4 $k; done; AR base q4 X=1; } 2>&1 | tee $OUT/ar27-q4-knobs.txt
while ! grep -q "done" $OUT/synth-bf16.log && [ $(el) -lt 165 ]; do sleep 1; done; cat $OUT/synth-bf16.log
[ -f $S/bf16/config.json ] && { AR new bf16 X=1; AR base bf16 X=1; [ $(el) -lt 180 ] && AR new bf16 X=1; [ $(el) -lt 187 ] && AR base bf16 X=1; } 2>&1 | tee $OUT/ar27-bf16.txt
echo "all done $(el) s"
