#!/usr/bin/env bash
# helper cudalat, an optional third device call FOR THE LEAD (session 7; not run by the helper): the
# final branch (rmsnorm >= 256 threads, DL_PIPE off, SEQ_PDL knob) through gpu-test.sh, then the
# 27B-16l q4 step: branch default vs MTPLX_CUDA_DL_PIPE=1 vs MTPLX_CUDA_SEQ_PDL=0 vs base, and the
# embedded model base vs branch. ~190 s.
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
G=.gpu-cudalat
rm -rf /tmp/base && mkdir -p /tmp/base
tar --exclude=./build --exclude='./.gpu-*' -cf - . | tar -xf - -C /tmp/base
mkdir -p /tmp/base/build && cp -a build/device-debs /tmp/base/build/
git apply $G/branch.patch || { echo PATCH FAILED; exit 1; }
find src tests -name '*.c' -o -name '*.cu' -o -name '*.h' -o -name '*.cuh' | xargs touch
( cd /tmp/base && nice -n 5 scripts/device-build.sh build model build/mtplx CUDA=1 > $OUT/base-build.log 2>&1; echo "base build rc $? at $(el) s" >> $OUT/base-build.log ) &
BP=$!
timeout 150 scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1 &
GT=$!
wait $BP; tail -1 $OUT/base-build.log
B=/tmp/base/build/mtplx M=build/mtplx S=/tmp/s; mkdir -p $S
( nice -n 5 $B synth --preset qwen35-27b-16l --dtype q4 --out $S/q4 --quiet; echo "q4 synth done at $(el) s" ) > $OUT/synth-q4.log 2>&1 &
wait $GT; echo "gpu-test rc $? at $(el) s"; grep -E "FAIL|gpu-test:" $OUT/gpu-test.txt
export MTPLX_DEVICE=cuda
bin() { [ $1 = new ] && echo $M || echo $B; }
AR() { local w=$1; shift; echo "== $w q4 $* $(el) s"; env "$@" timeout 15 $(bin $w) bench --device cuda --membw --verify-cost --rows 1 --reps 7 --context 512 --model $S/q4 2>&1 | grep -E "1-row|AR decode|rror"; }
EMB() { local w=$1; shift; echo "== emb $w $* $(el) s"; env "$@" timeout 15 $(bin $w) bench --device cuda --depths 0,3 2>&1 | grep -E "^(AR|D3) |rror"; }
while ! grep -q "done" $OUT/synth-q4.log && [ $(el) -lt 150 ]; do sleep 1; done
[ -f $S/q4/config.json ] && { AR new X=1; AR base X=1; AR new MTPLX_CUDA_DL_PIPE=1; AR new MTPLX_CUDA_SEQ_PDL=0; AR new X=1; AR base X=1; } 2>&1 | tee $OUT/ar27-q4.txt
[ $(el) -lt 180 ] && { EMB new X=1; EMB base X=1; EMB new X=1; EMB base X=1; } 2>&1 | tee $OUT/emb.txt
echo "all done $(el) s"
