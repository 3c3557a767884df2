set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
B="build/mtplx bench --device cuda --prompts 8 --temperature 0.6 --depths 0,3,8@0.4 --max-tokens 256"
for r in 1 2; do
  for k in "MTPLX_CUDA_FUSE_SWI=0 MTPLX_CUDA_FUSE_ATT_PREP=0 MTPLX_CUDA_ATT_MERGE_LAST=0" "MTPLX_CUDA_FUSE_SWI=0" "MTPLX_CUDA_FUSE_SWI=1"; do
    echo "[$(el) s] == round $r [$k]"
    env $k MTPLX_CUDA_STEPS=1 $B 2>&1 | grep -E "^(AR|D[0-9])|^ +1 +[0-9]+ "
  done
done
echo "[$(el) s] ALL DONE"
