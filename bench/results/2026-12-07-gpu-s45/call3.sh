# Session 45 call 3 (carry ["build/device-debs"]; ~270 s of device time left): call 2 trimmed — the unit tests,
# memcheck and the mtp_input check (TOP_MAPPED off vs on, sampled text) of gpu-test on the tree without
# norm-last.patch, one speed round (mapped off / on) before and one after if time is left.
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
[ $(el) -lt 90 ] && round 1
GPU_TEST_SKIP='^(gemm|moe_|sk_|attention_|batch_invariance_attention|launch_|gdn_prepares|graph_|commit_one)' scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1
echo "[$(el) s] gpu-test rc=$?"; grep -E "^(PASS|FAIL|SKIP)|gpu-test:" $OUT/gpu-test.txt | tr '\n' ';'; echo; grep -A15 "^FAIL" $OUT/gpu-test.txt | head -30
[ $(el) -lt 200 ] && round 2
grep -E "^== |^(AR|D[0-9])|^ +[19] +[0-9]+ " $OUT/bench.txt
echo "[$(el) s] ALL DONE"
