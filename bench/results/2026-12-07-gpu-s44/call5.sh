# PREPARED IN SESSION 44, NOT RUN (the device minutes ran out in failed starts). Applies norm-last.patch to the tree
# (src, the docs/architecture.md knob rows, scripts/gpu-test.sh's knob runs) unless already there. Run with carry
# ["build/device-debs"]: bash bench/results/2026-12-07-gpu-s44/call5.sh 2>&1 | tail -30 — about 250 s on a warm build.
# One build, the old paths by their knobs: (1) a split
# GDN head's last block normalises and prepares its rows (MTPLX_CUDA_GDN_NORM_LAST=0: the k_gdn_norm_seqs launch),
# (2) k_rmsnorm_prep's second half from a shared-memory copy of the row (MTPLX_CUDA_RMS_STAGE=0: read again);
# norm-last.patch = both. Bits of knobs off vs on, the GPU checks they touch, then speed alternated. Outputs under $OUT.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
grep -q gdn_norm_last src/backend/cuda/cuda_seq.cu || patch -p1 -s < bench/results/2026-12-07-gpu-s44/norm-last.patch || { echo "patch failed"; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda build/tests/test_batch > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
OFF="MTPLX_CUDA_GDN_NORM_LAST=0 MTPLX_CUDA_RMS_STAGE=0"
bench/cuda_same_bits.sh "env $OFF build/mtplx" "build/mtplx" > $OUT/bits.txt 2>&1; ok=$?; cat $OUT/bits.txt
echo "[$(el) s] bits rc=$ok"
B="--device cuda --prompts 8 --temperature 0.6 --max-tokens 256 --depths 0,3,8@0.4"
for r in 1 2 3; do
  [ $(el) -lt 400 ] || { echo "round $r skipped: $(el) s" >> $OUT/bench.txt; break; }
  for b in off on; do
    E=; [ $b = off ] && E=$OFF
    echo "== round $r knobs $b" >> $OUT/bench.txt
    env $E MTPLX_CUDA_STEPS=1 build/mtplx bench $B >> $OUT/bench.txt 2>&1
  done
done
grep -E "^== |^(AR|D[0-9])|^ +1 +[0-9]+ |skipped" $OUT/bench.txt
for t in test_backend_cuda test_batch; do timeout 120 build/tests/$t > $OUT/$t.txt 2>&1; echo "[$(el) s] $t rc=$?: $(tail -1 $OUT/$t.txt)"; done
SKIP_UNIT=1 GPU_TEST_SKIP='^(default_device|cli_|refuses_|launch_|attention_grouped|gemm|sk_|mtp_input|attention_prep|moe_|commit_one|graph_|compute_)' \
  scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1
echo "[$(el) s] gpu-test subset rc=$?"; grep -E "^(PASS|FAIL)" $OUT/gpu-test.txt | tr '\n' ';'; echo; grep -A15 "^FAIL" $OUT/gpu-test.txt | head -30
echo "[$(el) s] ALL DONE"
