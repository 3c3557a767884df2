# Session 45 call 4 (carry ["build/device-debs"]; ~185 s of device time after a start): the gpu-test checks
# the mapped top-k answer touches that call 1 did not run, on the final tree (no norm-last.patch): the CUDA
# unit tests of the logits_top op and of sampled MTP (test_backend_cuda, test_generate_dist's chi-square,
# test_family_mtp), the sampled text with MTPLX_CUDA_TOP_MAPPED=0 vs on (mtp_input check), compute-sanitizer.
set -uo pipefail
export MTPLX_DEVICE=cuda
nvidia-smi --query-gpu=name --format=csv,noheader
GPU_TEST_SKIP='^(default_device|test_forward|test_rows|test_generate$|test_family_goldens|test_family_layouts|test_mlx|test_quant|test_shapes|test_synth|test_fwd_pool|test_batch|test_sched|commit_one|cli_|refuses_|launch_|attention_|batch_invariance_attention|gemm|sk_|gdn_prepares|moe_|graph_)' \
  scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1
echo "gpu-test rc=$?"; grep -E "^(PASS|FAIL)|gpu-test:" $OUT/gpu-test.txt | tr '\n' ';'; echo; grep -A15 "^FAIL" $OUT/gpu-test.txt | head -30
