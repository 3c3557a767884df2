#!/usr/bin/env bash
# Session 42, call 3 (warm H100, both patches in the tree): the three knobs one at a time against all on,
# three rounds in rotated order (the host drifted during call 1), embedded bf16, T 0.6.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
B="build/mtplx bench --device cuda --prompts 8 --temperature 0.6 --depths 0,3,8@0.4 --max-tokens 256"
run() { echo "[$(el) s] == [$1]"; env $1 MTPLX_CUDA_STEPS=1 $B 2>&1 | grep -E "^(AR|D[0-9])|^ +1 +[0-9]+ "; }
A="MTPLX_CUDA_ALL_ON=1" S="MTPLX_CUDA_FUSE_SWI=0" P="MTPLX_CUDA_FUSE_ATT_PREP=0" M="MTPLX_CUDA_ATT_MERGE_LAST=0"
for c in "$A" "$S" "$P" "$M" "$M" "$P" "$S" "$A" "$A" "$S" "$P" "$M"; do run "$c"; done
echo "[$(el) s] ALL DONE"
