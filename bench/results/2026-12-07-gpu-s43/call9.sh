# session 43, call 9: scripts/gpu-test.sh on the landing tree (the attention cut of call 6, the fused prep's
# heads side by side and the MTP input's two sums of call 8; call 8's top-k change left out: slower), the
# MoE slot, integer-pipe and GEMM checks skipped for device time (this change reaches none of them).
set -uo pipefail
GPU_TEST_SKIP='gemm_bit_identical|sk_integer_pipe|moe_slots' scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1
echo "rc=$?"; grep -E "^(PASS|FAIL|SKIP)" $OUT/gpu-test.txt | tr '\n' ';'; echo; grep -A15 "^FAIL" $OUT/gpu-test.txt | head -40
