#!/usr/bin/env bash
# helper cudalat, device call 1 (session 7): main as sent (base, built in /tmp/base) and main + the
# branch (here); gpu-test.sh on the branch; then base vs branch alternated: the 27B-16l q4 pure-AR step,
# the embedded model's bench --depths 0,3 and 8 parallel samples; per-op profiles if time is left.
set -uo pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
G=.gpu-cudalat
rm -rf /tmp/base && mkdir -p /tmp/base
tar --exclude=./build --exclude='./.gpu-*' -cf - . | tar -xf - -C /tmp/base
mkdir -p /tmp/base/build && cp -a build/device-debs /tmp/base/build/
git apply $G/branch.patch || { echo PATCH FAILED; exit 1; }
find src tests -name '*.c' -o -name '*.cu' -o -name '*.h' -o -name '*.cuh' | xargs touch
( cd /tmp/base && nice -n 5 scripts/device-build.sh build build/mtplx CUDA=1 > $OUT/base-build.log 2>&1; echo "base build rc $? at $(el) s" >> $OUT/base-build.log ) &
BP=$!
timeout 150 scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1 &
GT=$!
wait $BP; tail -1 $OUT/base-build.log
B=/tmp/base/build/mtplx M=build/mtplx S=/tmp/s; mkdir -p $S
( nice -n 5 $B synth --preset qwen35-27b-16l --dtype q4 --out $S/q4 --quiet; echo "q4 synth done at $(el) s" ) > $OUT/synth-q4.log 2>&1 &
wait $GT; echo "gpu-test rc $? at $(el) s"; grep -E "FAIL|gpu-test:" $OUT/gpu-test.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
export MTPLX_DEVICE=cuda
bin() { [ $1 = new ] && echo $M || echo $B; }
AR() { echo "== $1 q4 $(el) s"; timeout 15 $(bin $1) bench --device cuda --membw --verify-cost --rows 1 --reps 7 --context 512 --model $S/q4 2>&1 | grep -E "membw|GB/s|1-row|AR decode|rror"; }
EMB() { local w=$1; shift; echo "== emb $w $* $(el) s"; env "$@" timeout 15 $(bin $w) bench --device cuda --depths 0,3 2>&1 | grep -E "^(AR|D3) |rror"; }
PAR() { local w=$1; shift; echo "== par8 $w $* $(el) s"; env "$@" timeout 12 $(bin $w) run --device cuda --prompt "def fib(n):" --samples 8 --parallel --depth 3 --max-tokens 128 --temperature 0.6 2>&1 | grep -E "aggregate|rror"; }
while ! grep -q "done" $OUT/synth-q4.log && [ $(el) -lt 150 ]; do sleep 1; done; cat $OUT/synth-q4.log
[ -f $S/q4/config.json ] && { AR new; AR base; } 2>&1 | tee $OUT/ar27-q4.txt
[ $(el) -lt 170 ] && { EMB new X=1; EMB base X=1; } 2>&1 | tee $OUT/emb.txt
[ $(el) -lt 178 ] && { PAR new X=1; PAR base X=1; } 2>&1 | tee $OUT/par8.txt
[ $(el) -lt 165 ] && [ -f $S/q4/config.json ] && { AR new; AR base; } 2>&1 | tee -a $OUT/ar27-q4.txt
[ $(el) -lt 184 ] && MTPLX_CUDA_PROFILE=2 timeout 8 $M bench --device cuda --verify-cost --rows 1 --reps 21 --context 16 --model $S/q4 > $OUT/prof-q4-new.txt 2>&1
echo "all done $(el) s"
