# Session 45 call 1 (carry ["build/device-debs"]; the tree has session 44's norm-last.patch applied and the
# mapped top-k answer): (1) rt.cu, the round-trip micro-benchmark; (2) one build, bits of every new knob off vs
# on (bench/cuda_same_bits.sh); (3) D8@0.4 speed, three arms alternated: base (all off), norm (norm-last on,
# mapped off), all (defaults); (4) the unit tests and the gpu-test checks the changes touch.
set -uo pipefail
export MTPLX_DEVICE=cuda
D=bench/results/2026-12-07-gpu-s45
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
nvcc -O3 -arch=sm_90 $D/rt.cu -o /tmp/rt && /tmp/rt | tee $OUT/rt.txt
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda build/tests/test_batch > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
NL="MTPLX_CUDA_GDN_NORM_LAST=0 MTPLX_CUDA_RMS_STAGE=0"
bench/cuda_same_bits.sh "env $NL MTPLX_CUDA_TOP_MAPPED=0 build/mtplx" "build/mtplx" > $OUT/bits.txt 2>&1; ok=$?; tail -12 $OUT/bits.txt
echo "[$(el) s] bits rc=$ok"
B="--device cuda --prompts 8 --temperature 0.6 --max-tokens 256 --depths 0,3,8@0.4"
for r in 1 2 3; do
  [ $(el) -lt 380 ] || { echo "round $r skipped: $(el) s" >> $OUT/bench.txt; break; }
  for b in base norm all; do
    case $b in base) E="$NL MTPLX_CUDA_TOP_MAPPED=0";; norm) E="MTPLX_CUDA_TOP_MAPPED=0";; all) E=;; esac
    echo "== round $r $b" >> $OUT/bench.txt
    env $E MTPLX_CUDA_STEPS=1 build/mtplx bench $B >> $OUT/bench.txt 2>&1
  done
done
grep -E "^== |^(AR|D[0-9])|^ +1 +[0-9]+ |skipped" $OUT/bench.txt
for t in test_backend_cuda test_batch; do timeout 120 build/tests/$t > $OUT/$t.txt 2>&1; echo "[$(el) s] $t rc=$?: $(tail -1 $OUT/$t.txt)"; done
SKIP_UNIT=1 GPU_TEST_SKIP='^(default_device|cli_|refuses_|attention_grouped|batch_invariance_attention|gemm|sk_|attention_prep|moe_|compute_)' \
  scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1
echo "[$(el) s] gpu-test subset rc=$?"; grep -E "^(PASS|FAIL)" $OUT/gpu-test.txt | tr '\n' ';'; echo; grep -A15 "^FAIL" $OUT/gpu-test.txt | head -30
if [ $(el) -lt 470 ]; then
  MTPLX_CUDA_STEPS=1 build/mtplx bench --device cuda --prompts 8 --temperature 0.6 --max-tokens 256 --depths 8@0.3,8@0.5,6@0.4,8@0.4 > $OUT/depths.txt 2>&1
  grep -E "^(AR|D[0-9])" $OUT/depths.txt
fi
echo "[$(el) s] ALL DONE"
