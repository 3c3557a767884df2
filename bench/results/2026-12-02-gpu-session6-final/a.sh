#!/usr/bin/env bash
# lead, session 6, call A: part 1 of the small model into /tmp/smx, then gpu-test.sh on merged main
# (the embedded model's shards travel in this call; call B carries part 2 without them).
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.used --format=csv
timeout 250 scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc $? $(( $(date +%s) - t0 )) s"
grep -E "PASS|FAIL|SKIP|passed|failed" $OUT/gpu-test.txt | tail -40
echo "+ embedded bench D0,3"; timeout 30 build/mtplx bench --device cuda --depths 0,3 2>&1 | tail -4 | tee $OUT/bench-emb.txt
echo "total $(( $(date +%s) - t0 )) s"
