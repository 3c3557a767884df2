# Session 45 call 2 (carry ["build/device-debs"]; ~330 s of device time left): the tree without norm-last.patch
# (call 1: its GDN norm in a split head's last block made a 9-row verify's GPU time 15 us longer), with the mapped
# top-k answer. One round of D8@0.4 speed with MTPLX_CUDA_TOP_MAPPED=0 vs default (call 1 compared their bits;
# gpu-test's mtp_input check compares their sampled text), gpu-test without the checks of untouched kernels
# (GEMM, MoE slots, stream-K layouts / integer pipe, grouped attention), a second round if time is left.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
B="--device cuda --prompts 8 --temperature 0.6 --max-tokens 256 --depths 0,3,8@0.4"
round() {
  for b in off on; do
    E=; [ $b = off ] && E=MTPLX_CUDA_TOP_MAPPED=0
    echo "== round $1 mapped $b" >> $OUT/bench.txt
    env $E MTPLX_CUDA_STEPS=1 build/mtplx bench $B >> $OUT/bench.txt 2>&1
  done
}
round 1
GPU_TEST_SKIP='^(gemm|moe_|sk_|attention_grouped|batch_invariance_attention)' scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1
echo "[$(el) s] gpu-test rc=$?"; grep -E "^(PASS|FAIL|SKIP)|gpu-test:" $OUT/gpu-test.txt | tr '\n' ';'; echo; grep -A15 "^FAIL" $OUT/gpu-test.txt | head -30
[ $(el) -lt 280 ] && round 2
grep -E "^== |^(AR|D[0-9])|^ +[19] +[0-9]+ " $OUT/bench.txt
echo "[$(el) s] ALL DONE"
