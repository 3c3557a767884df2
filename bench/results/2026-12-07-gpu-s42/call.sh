#!/usr/bin/env bash
# Session 42 (lead), one device call: session 41's swiglu-down.patch and this session's att-fuse.patch (the
# attention prep inside the one-query blocks for one-row calls; a query's key chunks merged by its last
# block) applied and built once; each one's bit check (gpu-test checks 8e / 8f, inline) and
# test_backend_cuda; each knob 0 / 1 alternated twice (embedded bf16, T 0.6; the merge knob also at
# 640 new tokens, where queries see 2-3 key chunks); then the whole gpu-test.sh (its first full run with
# 9ffb427 too).
set -uo pipefail
D=bench/results/2026-12-07-gpu-s41
E=bench/results/2026-12-07-gpu-s42
grep -q fuse_swi src/backend/cuda/cuda_backend.h || git apply $D/swiglu-down.patch || patch -p1 --forward < $D/swiglu-down.patch || exit 1
grep -q fuse_att_prep src/backend/cuda/cuda_backend.h || git apply $E/att-fuse.patch || patch -p1 --forward < $E/att-fuse.patch || exit 1
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
for f in swi_equal att_fuse_equal; do
    eval "$(sed -n "/^$f() {/,/^}/p" scripts/gpu-test.sh)"
    if $f > $OUT/$f.txt 2>&1; then echo "PASS $f"; else echo "FAIL $f"; tail -5 $OUT/$f.txt; fi
done
timeout 200 build/tests/test_backend_cuda > $OUT/test_backend_cuda.txt 2>&1; echo "test_backend_cuda rc $? $(tail -1 $OUT/test_backend_cuda.txt)"
grep -E "FAIL|differ" $OUT/test_backend_cuda.txt | head -5
echo "[$(el) s] checked"
B="build/mtplx bench --device cuda --prompts 8 --temperature 0.6 --depths 0,3,8@0.4"
for k in SWI:256 ATT_PREP:256 MERGE_LAST:256 MERGE_LAST:640; do
    IFS=: read name n <<< "$k"
    knob=MTPLX_CUDA_FUSE_$name; [ $name = MERGE_LAST ] && knob=MTPLX_CUDA_ATT_MERGE_LAST
    for v in 0 1 0 1; do
        echo "[$(el) s] == [$knob=$v] --max-tokens $n"
        env $knob=$v MTPLX_CUDA_STEPS=1 $B --max-tokens $n 2>&1 | grep -E "^(depth|AR|D[0-9])|^ +1 +[0-9]+ "
    done
done
echo "[$(el) s] == gpu-test"
timeout $(( 575 - $(el) )) bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc $?"
grep -E "^(PASS|FAIL|SKIP)|failed" $OUT/gpu-test.txt | tail -45
echo "[$(el) s] ALL DONE"
