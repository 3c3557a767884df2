# session 43, call 1: the MLA long-context batched check on CUDA (test_backend_cuda), and where a draft step's
# wall time goes: the step table of draft-only runs (1-row forwards are then draft steps) against AR-only runs,
# eager and with step graphs; nsys's view of the same if the machine has it. Outputs under $OUT.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
scripts/device-build.sh build CUDA=1 model build/mtplx build/tests/test_backend_cuda > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
timeout 300 build/tests/test_backend_cuda > $OUT/test_backend_cuda.txt 2>&1; echo "[$(el) s] test_backend_cuda rc=$?"; tail -3 $OUT/test_backend_cuda.txt
B="build/mtplx bench --device cuda --prompts 8 --temperature 0.6 --max-tokens 256"
for r in 1 2; do
  for d in 0 8@0.4 3; do
    for g in 0 1; do
      echo "== round $r depth $d graph $g" >> $OUT/steps.txt
      MTPLX_CUDA_GRAPH=$g MTPLX_CUDA_STEPS=1 $B --depths $d >> $OUT/steps.txt 2>&1
    done
  done
done
echo "[$(el) s] steps done"; grep -E "^== |^(AR|D[0-9])|^ +[0-9]+ +[0-9]+ " $OUT/steps.txt | head -80
NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}; ncu: $(command -v ncu)" | tee $OUT/tools.txt
if [ -n "$NSYS" ]; then
  $NSYS profile -t cuda -o /tmp/d8 -f true $B --depths 8@0.4 --prompts 2 > $OUT/nsys-run.txt 2>&1
  $NSYS stats -r cuda_gpu_kern_sum,cuda_api_sum -f csv -o $OUT/d8 /tmp/d8.nsys-rep > /dev/null 2>&1
  $NSYS export --type sqlite -o /tmp/d8.sqlite /tmp/d8.nsys-rep > /dev/null 2>&1 && python3 bench/results/2026-12-07-gpu-s43/nsys_gaps.py /tmp/d8.sqlite > $OUT/gaps.txt 2>&1; cat $OUT/gaps.txt | head -40
  ls -la $OUT; echo "[$(el) s] nsys done"
fi
echo "[$(el) s] ALL DONE"
