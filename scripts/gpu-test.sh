#!/usr/bin/env bash
# GPU test of the CUDA backend, in one run on a machine with an NVIDIA GPU and nvcc (README, "Testing
# on a GPU"). Builds with `make CUDA=1` (through scripts/device-build.sh on the GPU machine, which has
# no package registry: `scripts/device-build.sh fetch` here first and carry build/device-debs; with
# NATIVE=1, plain make with the system's headers), then with every model on the GPU (MTPLX_DEVICE=cuda):
#   1. the CUDA ops against references and their row invariance (test_backend_cuda); the model-level unit tests: HF / family / MLX / quantized goldens within the CPU tolerances,
#      row invariance (prefill ≡ decode, R = 1 vs n), greedy MTP ≡ AR at depths 1..5 on 22 prompts,
#      the chi-square distribution test, synthetic shapes; batch invariance (test_batch: every family,
#      random batches bit-identical to solo; test_sched: 16 concurrent generations token for token);
#   2. greedy MTP ≡ AR through the CLI at depths 1..5 (same text as depth 0);
#   3. bad input refused clearly: a corrupt checkpoint, a model larger than the GPU's free memory
#      (MTPLX_GPU_MEM_LIMIT), --device cuda:99;
#   4. compute-sanitizer memcheck clean on a short MTP run;
#   5. graphs / PDL / fusions / stream / the batched rmsnorm loads / the L2 norms inside the GDN step /
#      inline sequence tables / pipelined downloads / async uploads / PDL of the sequence kernels / GDN
#      heads split over blocks (MTPLX_CUDA_GRAPH, _PDL, _FUSE, _STREAM, _RMS_BATCH, _GDN_L2, _SEQ_INLINE,
#      _DL_PIPE, _UP_ASYNC, _SEQ_PDL, _GDN_SPLIT=1, _GDN_XPOSE, _ATT_GROUP) off ≡ on, bit for bit; and the
#      grouped attention blocks over a 700-token prompt (keys in three chunks, partials merged) ≡ one query a
#      block (5b);
#   6. the many-row GEMM off ≡ on ≡ everywhere (MTPLX_CUDA_GEMM=0, default, MTPLX_CUDA_GEMM_MIN=1), bf16 and q4,
#      and stream-K passes of 16 rows ≡ 32 (MTPLX_CUDA_SK_ROWS=16 with the GEMM off), bf16 row groups in
#      block rows ≡ in each warp ≡ block rows in waves (MTPLX_CUDA_SK_RG=0 / 1 / default 2 / 3);
#   7. the stream-K q kernels' two span layouts ≡ (MTPLX_CUDA_SK_GA=1 / 0), q4 groups of 64 and 32, q8;
#   8. the integer-pipe decode kernel ≡ the mma one (MTPLX_CUDA_SK_DP=0 / default / 4; its spans interleaved
#      or in turn, MTPLX_CUDA_SK_IL=1 / 0);
#   8b. the GDN step's and the attention's fused preparation of the out-projection's input ≡ the separate
#      launch (MTPLX_CUDA_FUSE_SEQ);
#   8c. the device MoE's per-slot kernels ≡ its tiles (MTPLX_CUDA_MOE_SLOTS, _MOE_STAGE, _MOE_GATE1, _MOE_TSTAGE,
#       _MOE_TLOOP, _MOE_TROWS);
#   8d. the MTP layer's input in one launch ≡ embed_rows and two rmsnorm_rows (MTPLX_CUDA_FUSE_MTP_IN), and
#       sampled MTP text with the one-block top k of a small vocabulary ≡ the sliced one (MTPLX_CUDA_TOP_ROW);
#   9. step graphs recorded, replayed and patched in place ≡ eager launches in generated text.
# Prints one PASS/FAIL line per check and exits non-zero when any failed. GPU_TEST_SKIP=REGEX skips the checks
# whose names match (a shorter run when device time is short; say so where its result is quoted).
set -uo pipefail
cd "$(dirname "$0")/.."
TESTS="test_backend_cuda test_forward test_rows test_generate test_generate_dist test_family_goldens test_family_layouts
       test_family_mtp test_mlx_goldens test_quant_goldens test_shapes test_synth test_fwd_pool test_batch test_sched"
targets="model build/mtplx"
for t in $TESTS; do targets="$targets build/tests/$t"; done
t0=$(date +%s)
if [ "${NATIVE:-0}" = 1 ]; then
    make -j"$(nproc)" CUDA=1 $targets > /tmp/gpu-test-build.log 2>&1
else
    scripts/device-build.sh build $targets CUDA=1 > /tmp/gpu-test-build.log 2>&1
fi
if [ $? -ne 0 ]; then tail -40 /tmp/gpu-test-build.log; echo "FAIL build"; exit 1; fi
echo "PASS build ($(( $(date +%s) - t0 )) s)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

fails=0
check() { # check NAME COMMAND...: runs it, prints PASS/FAIL and the tail of its output on failure
    local name=$1; shift
    local log=/tmp/gpu-test-$name.log s=$(date +%s)
    if [ -n "${GPU_TEST_SKIP:-}" ] && [[ $name =~ $GPU_TEST_SKIP ]]; then echo "SKIP $name (GPU_TEST_SKIP)"; return 0; fi
    if "$@" > "$log" 2>&1; then echo "PASS $name ($(( $(date +%s) - s )) s)"
    else echo "FAIL $name ($(( $(date +%s) - s )) s)"; tail -15 "$log"; fails=$((fails + 1)); fi
}
export MTPLX_DEVICE=cuda
# the test models' 8,192-id vocabularies are under the top-k download's default threshold (65536 ids):
# take the top-k path anyway so the checks keep covering it
export MTPLX_CUDA_TOP_MIN_VOCAB=${MTPLX_CUDA_TOP_MIN_VOCAB:-1}

# the embedded model converted to q4 (groups of 64 and 32) and q8 under /tmp, once per run, by whichever
# check needs them first (so GPU_TEST_SKIP may skip any check)
rm -f /tmp/gpu-qmodels.done
qmodels() {
    [ -f /tmp/gpu-qmodels.done ] && return 0
    rm -rf /tmp/gpu-q4 /tmp/gpu-q4g32 /tmp/gpu-q8
    build/mtplx convert --q-bits 4 --out /tmp/gpu-q4 --quiet &&
        build/mtplx convert --q-bits 4 --group-size 32 --out /tmp/gpu-q4g32 --quiet &&
        build/mtplx convert --q-bits 8 --out /tmp/gpu-q8 --quiet && touch /tmp/gpu-qmodels.done
}

uses_gpu() { MTPLX_CUDA_VERBOSE=1 build/mtplx run --prompt hi --max-tokens 2 2>&1 | grep "CUDA backend on GPU"; }
check default_device_is_the_gpu uses_gpu

# 1. unit tests that load models: every model of them on the GPU
[ "${SKIP_UNIT:-0}" = 1 ] || for t in $TESTS; do check "$t" timeout "${T_TIMEOUT:-300}" build/tests/$t; done
# the batched commit's one-element-a-thread form (its float4 form is the default): the CUDA op tests again
[ "${SKIP_UNIT:-0}" = 1 ] || check commit_one_element_a_thread env MTPLX_CUDA_COMMIT=2 timeout 300 build/tests/test_backend_cuda

# 2. greedy MTP ≡ AR through the CLI
P='def quicksort(arr):'
build/mtplx run --prompt "$P" --max-tokens 64 --temperature 0 --depth 0 --quiet > /tmp/gpu-ar.txt 2>/dev/null
mtp_equal() {
    for d in 1 2 3 4 5; do
        build/mtplx run --prompt "$P" --max-tokens 64 --temperature 0 --depth $d --quiet > /tmp/gpu-d$d.txt || return 1
        cmp -s /tmp/gpu-ar.txt /tmp/gpu-d$d.txt || { echo "depth $d differs:"; cat /tmp/gpu-d$d.txt; return 1; }
    done
    [ -s /tmp/gpu-ar.txt ]
}
check cli_greedy_mtp_equals_ar mtp_equal
cpu_equal() { # the GPU's greedy text matches the CPU's on the embedded model
    build/mtplx run --device cpu --prompt "$P" --max-tokens 64 --temperature 0 --depth 0 --quiet > /tmp/gpu-cpu.txt &&
        cmp /tmp/gpu-ar.txt /tmp/gpu-cpu.txt
}
check cli_greedy_gpu_equals_cpu cpu_equal

# 3. bad input
corrupt() {
    local d=/tmp/gpu-corrupt; rm -rf $d; cp -r models/qwen35-tiny-code $d; rm -f $d/*.xz
    local f=$(ls $d/model-*.safetensors | head -1); truncate -s 1000 "$f"
    ! build/mtplx run --model $d --prompt hi --max-tokens 4 > /tmp/gpu-bad.txt 2>&1 || return 1
    cat /tmp/gpu-bad.txt; grep -qi "safetensors\|truncat\|header\|size" /tmp/gpu-bad.txt
}
check refuses_corrupt_checkpoint corrupt
too_big() {
    ! MTPLX_GPU_MEM_LIMIT=1000000 build/mtplx run --prompt hi --max-tokens 4 > /tmp/gpu-big.txt 2>&1 || return 1
    cat /tmp/gpu-big.txt; grep -q "do not fit on GPU" /tmp/gpu-big.txt
}
check refuses_model_larger_than_gpu too_big
no_gpu() {
    ! build/mtplx run --device cuda:99 --prompt hi --max-tokens 4 > /tmp/gpu-99.txt 2>&1 || return 1
    cat /tmp/gpu-99.txt; grep -q "GPU" /tmp/gpu-99.txt
}
check refuses_missing_gpu no_gpu

# 5. the launch machinery (step graphs, programmatic dependent launch, fused residual add / norm /
#    activation preparation, the non-blocking stream) changes no bit: logits of a prefill, of decode
#    steps (graph replays) and of the MTP head, all of it off vs on
machinery_equal() {
    local T=100,2000,31,4096,777,12,900,345,6789,21,1500,88,4321,600,7,2500 mode
    for mode in "" "--step" "--mtp" "--step --mtp"; do
        MTPLX_CUDA_GRAPH=0 MTPLX_CUDA_PDL=0 MTPLX_CUDA_FUSE=0 MTPLX_CUDA_STREAM=0 MTPLX_CUDA_RMS_BATCH=1 \
            MTPLX_CUDA_GDN_L2=0 MTPLX_CUDA_SEQ_INLINE=0 MTPLX_CUDA_DL_PIPE=0 MTPLX_CUDA_UP_ASYNC=0 MTPLX_CUDA_SEQ_PDL=0 \
            MTPLX_CUDA_GDN_SPLIT=1 MTPLX_CUDA_GDN_XPOSE=0 MTPLX_CUDA_ATT_GROUP=0 MTPLX_CUDA_FUSE_MTP_IN=0 MTPLX_CUDA_FUSE_ATT_PREP=0 MTPLX_CUDA_ATT_MERGE_LAST=0 build/mtplx logits --tokens $T $mode --out /tmp/gpu-l0.safetensors > /dev/null || return 1
        MTPLX_CUDA_GRAPH=1 MTPLX_CUDA_PDL=1 MTPLX_CUDA_FUSE=1 MTPLX_CUDA_STREAM=1 MTPLX_CUDA_DL_PIPE=1 \
            build/mtplx logits --tokens $T $mode --out /tmp/gpu-l1.safetensors > /dev/null || return 1
        cmp /tmp/gpu-l0.safetensors /tmp/gpu-l1.safetensors || { echo "logits [$mode] differ"; return 1; }
        echo "logits [$mode]: off == on"
    done
}
check launch_machinery_bit_identical machinery_equal

# 5b. attention blocks that take the queries of one KV head together, their key and value tiles staged in
#     shared memory (cuda_seq.cu, attn_core_gbody), give each query the bits of a block of its own, also
#     over several key chunks: a 700-token prefill, its MTP head and 700 one-row steps (with and without the
#     MTP head), MTPLX_CUDA_ATT_GROUP=0 against =2 (grouped wherever the shape allows), the default
#     (grouped when the launch has a block an SM; a prefill chunk's blocks take 16 queries, two an SM) and
#     the prefill's blocks of up to 32 and 8 queries (MTPLX_CUDA_ATT_QB)
att_group_equal() {
    local T=$(seq -s, 5 3 2100) mode g
    for mode in "" "--mtp" "--step" "--step --mtp"; do
        MTPLX_CUDA_ATT_GROUP=0 build/mtplx logits --tokens $T $mode --out /tmp/gpu-a0.safetensors > /dev/null || return 1
        for g in ATT_GROUP=2 ATT_GROUP=1 ATT_QB=32 ATT_QB=8; do
            env MTPLX_CUDA_$g build/mtplx logits --tokens $T $mode --out /tmp/gpu-a1.safetensors > /dev/null || return 1
            cmp /tmp/gpu-a0.safetensors /tmp/gpu-a1.safetensors || { echo "logits [$mode] $g differ"; return 1; }
            echo "logits [$mode]: one query a block == $g"
        done
    done
}
check attention_grouped_bit_identical att_group_equal
# and batch invariance with the grouped blocks wherever the shape allows (solo and batched rows alike)
att_group_batch() { MTPLX_CUDA_ATT_GROUP=2 build/tests/test_batch; }
check batch_invariance_attention_grouped att_group_batch

# 6. the many-row GEMM (cuda_gemm.cu) changes no bit: a 100-token prefill's logits (and the MTP head's)
#    with every matmul on the stream-K kernels (MTPLX_CUDA_GEMM=0), the default (the GEMM from 48 rows),
#    and the GEMM for every call (MTPLX_CUDA_GEMM_MIN=1), on the embedded model in bf16 and converted to q4;
#    and with the GEMM off, stream-K launches of 16 rows instead of 32 (MTPLX_CUDA_SK_ROWS=16) and with a
#    bf16 launch's row groups in each warp instead of one a block row (MTPLX_CUDA_SK_RG=0), one a block row
#    only with the split's K batch (=1) and always (=3)
gemm_equal() {
    local T=$(seq -s, 11 37 3674) q4=/tmp/gpu-q4 m mode
    qmodels || return 1
    for m in models/qwen35-tiny-code $q4; do
        for mode in "" "--mtp"; do
            MTPLX_CUDA_GEMM=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/gpu-g0.safetensors > /dev/null || return 1
            build/mtplx logits --model $m --tokens $T $mode --out /tmp/gpu-g1.safetensors > /dev/null || return 1
            MTPLX_CUDA_GEMM_MIN=1 build/mtplx logits --model $m --tokens $T $mode --out /tmp/gpu-g2.safetensors > /dev/null || return 1
            MTPLX_CUDA_GEMM=0 MTPLX_CUDA_SK_ROWS=16 build/mtplx logits --model $m --tokens $T $mode --out /tmp/gpu-g3.safetensors > /dev/null || return 1
            for g in 0 1 3; do
                MTPLX_CUDA_GEMM=0 MTPLX_CUDA_SK_RG=$g build/mtplx logits --model $m --tokens $T $mode --out /tmp/gpu-g4$g.safetensors > /dev/null || return 1
            done
            cmp /tmp/gpu-g0.safetensors /tmp/gpu-g1.safetensors && cmp /tmp/gpu-g0.safetensors /tmp/gpu-g2.safetensors &&
                cmp /tmp/gpu-g0.safetensors /tmp/gpu-g3.safetensors && cmp /tmp/gpu-g0.safetensors /tmp/gpu-g40.safetensors &&
                cmp /tmp/gpu-g0.safetensors /tmp/gpu-g41.safetensors && cmp /tmp/gpu-g0.safetensors /tmp/gpu-g43.safetensors ||
                { echo "$m logits [$mode] differ"; return 1; }
            echo "$m logits [$mode]: stream-K == GEMM"
        done
    done
}
check gemm_bit_identical gemm_equal

# 7. the two span layouts of the stream-K q kernels (cuda_mma_sk.cu: a piece of every group per thread,
#    or a quarter of the span with the other groups masked) give the same bits: logits of the same
#    prefill (launches of 16 rows and of 4) with every matmul on stream-K, MTPLX_CUDA_SK_GA=1 against
#    =0, in q4 with groups of 64 and 32 (qmodels), and q8 with groups of 64
layouts_equal() {
    local T=$(seq -s, 11 37 3674) m mode
    qmodels || return 1
    for m in /tmp/gpu-q4 /tmp/gpu-q4g32 /tmp/gpu-q8; do
        for mode in "" "--mtp"; do
            MTPLX_CUDA_GEMM=0 MTPLX_CUDA_SK_GA=1 build/mtplx logits --model $m --tokens $T $mode --out /tmp/gpu-l0.safetensors > /dev/null || return 1
            MTPLX_CUDA_GEMM=0 MTPLX_CUDA_SK_GA=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/gpu-l1.safetensors > /dev/null || return 1
            cmp /tmp/gpu-l0.safetensors /tmp/gpu-l1.safetensors || { echo "$m logits [$mode] differ"; return 1; }
            echo "$m logits [$mode]: group pieces == masked quarters"
        done
    done
}
check sk_layouts_bit_identical layouts_equal

# 8. the integer-pipe decode kernel (cuda_mma_sk.cu, k_sk_qdp: launches of up to MTPLX_CUDA_SK_DP rows)
#    gives the mma kernel's bits: decode-step logits (1-row launches) and the MTP head's, with it off
#    (MTPLX_CUDA_SK_DP=0), by default, up to 4 rows and with a batch's spans interleaved or in turn
#    (MTPLX_CUDA_SK_IL=1 / 0), in q4 groups of 64 and 32 and q8 groups of 64;
#    and the ops' row-invariance checks with it taking 1..4-row launches
dp_equal() {
    local T=100,2000,31,4096,777,12,900,345,6789,21,1500,88,4321,600,7,2500 m mode
    qmodels || return 1
    for m in /tmp/gpu-q4 /tmp/gpu-q4g32 /tmp/gpu-q8; do
        for mode in "--step" "--step --mtp"; do
            MTPLX_CUDA_SK_DP=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/gpu-l0.safetensors > /dev/null || return 1
            build/mtplx logits --model $m --tokens $T $mode --out /tmp/gpu-l1.safetensors > /dev/null || return 1
            MTPLX_CUDA_SK_DP=4 build/mtplx logits --model $m --tokens $T $mode --out /tmp/gpu-l2.safetensors > /dev/null || return 1
            cmp /tmp/gpu-l0.safetensors /tmp/gpu-l1.safetensors && cmp /tmp/gpu-l0.safetensors /tmp/gpu-l2.safetensors ||
                { echo "$m logits [$mode] differ"; return 1; }
            for il in 0 1; do
                MTPLX_CUDA_SK_IL=$il build/mtplx logits --model $m --tokens $T $mode --out /tmp/gpu-l2.safetensors > /dev/null || return 1
                cmp /tmp/gpu-l0.safetensors /tmp/gpu-l2.safetensors || { echo "$m logits [$mode] SK_IL=$il differ"; return 1; }
            done
            echo "$m logits [$mode]: mma == integer pipe (its spans interleaved or in turn)"
        done
    done
    MTPLX_CUDA_SK_DP=4 build/tests/test_backend_cuda
}
check sk_integer_pipe_bit_identical dp_equal

# 8b. the GDN step and the attention (core and merge blocks) preparing their outputs for the output
#     projection in their own kernels (cuda_seq.cu, cu_prep_from) give the bits of the separate
#     k_split_x / k_qact launch: logits of a prefill, of decode steps (both also over 300 tokens: the
#     many-row GEMM reads the prefill's, and the steps' attention merges key chunks) and of the
#     MTP head with it off (MTPLX_CUDA_FUSE_SEQ=0), on, and on with the fused-norm GDN step forced
#     (MTPLX_CUDA_GDN_SPLIT=1; the default splits a head's warps for many rows and prepares in the norm
#     kernel), on the embedded model in bf16, q4 groups of 64 and 32, and q8
seq_prep_equal() {
    local T=100,2000,31,4096,777,12,900,345,6789,21,1500,88,4321,600,7,2500 m mode
    qmodels || return 1
    local L=$(seq -s, 11 13 3900) T0=
    for m in "" /tmp/gpu-q4 /tmp/gpu-q4g32 /tmp/gpu-q8; do
        for mode in "" "--step" "--step --mtp" "--long" "--long --step"; do
            [ "${mode#--long}" != "$mode" ] && { T0=$T; T=$L; mode=${mode#--long}; mode=${mode# }; }
            MTPLX_CUDA_FUSE_SEQ=0 build/mtplx logits ${m:+--model $m} --tokens $T $mode --out /tmp/gpu-l0.safetensors > /dev/null || return 1
            build/mtplx logits ${m:+--model $m} --tokens $T $mode --out /tmp/gpu-l1.safetensors > /dev/null || return 1
            MTPLX_CUDA_GDN_SPLIT=1 build/mtplx logits ${m:+--model $m} --tokens $T $mode --out /tmp/gpu-l2.safetensors > /dev/null || return 1
            cmp /tmp/gpu-l0.safetensors /tmp/gpu-l1.safetensors && cmp /tmp/gpu-l0.safetensors /tmp/gpu-l2.safetensors ||
                { echo "${m:-embedded} logits [$mode] differ"; return 1; }
            echo "${m:-embedded} logits [$mode, $(echo $T | tr , '\n' | wc -l) tokens]: separate == fused preparation"
            [ -n "${T0:-}" ] && { T=$T0; T0=; }
        done
    done
}
check gdn_prepares_out_projection_bit_identical seq_prep_equal

# 8d. the MTP layer's input (the embedding of the next tokens, its norm and the hidden rows' norm, and the
#     preparation of their concatenation for the fc) in one launch gives the bits of embed_rows and two
#     rmsnorm_rows (MTPLX_CUDA_FUSE_MTP_IN=0): MTP head logits of one call and of steps, embedded bf16, q4
#     groups of 64 and 32, q8; and sampled depth-3 runs with the small vocabulary's top k in one block a row
#     give the text of the sliced top k (MTPLX_CUDA_TOP_ROW=0) and of the answers downloaded by the copy
#     engine instead of read from mapped host memory (MTPLX_CUDA_TOP_MAPPED=0)
mtp_in_equal() {
    local T=100,2000,31,4096,777,12,900,345,6789,21,1500,88,4321,600,7,2500 m mode
    qmodels || return 1
    for m in "" /tmp/gpu-q4 /tmp/gpu-q4g32 /tmp/gpu-q8; do
        for mode in "--mtp" "--step --mtp"; do
            MTPLX_CUDA_FUSE_MTP_IN=0 build/mtplx logits ${m:+--model $m} --tokens $T $mode --out /tmp/gpu-l0.safetensors > /dev/null || return 1
            build/mtplx logits ${m:+--model $m} --tokens $T $mode --out /tmp/gpu-l1.safetensors > /dev/null || return 1
            cmp /tmp/gpu-l0.safetensors /tmp/gpu-l1.safetensors || { echo "${m:-embedded} logits [$mode] differ"; return 1; }
            echo "${m:-embedded} logits [$mode]: three launches == one"
        done
        MTPLX_CUDA_TOP_ROW=0 build/mtplx run ${m:+--model $m} --prompt "def fib(n):" --max-tokens 96 --depth 3 \
            --draft-min-conf 0 --temperature 0.7 --seed 9 > /tmp/gpu-t0.txt 2>/dev/null || return 1
        build/mtplx run ${m:+--model $m} --prompt "def fib(n):" --max-tokens 96 --depth 3 --draft-min-conf 0 \
            --temperature 0.7 --seed 9 > /tmp/gpu-t1.txt 2>/dev/null || return 1
        cmp /tmp/gpu-t0.txt /tmp/gpu-t1.txt || { echo "${m:-embedded} sampled text differs with TOP_ROW"; return 1; }
        echo "${m:-embedded} sampled D3 text: sliced top k == one block a row"
        MTPLX_CUDA_TOP_MAPPED=0 build/mtplx run ${m:+--model $m} --prompt "def fib(n):" --max-tokens 96 --depth 3 \
            --draft-min-conf 0 --temperature 0.7 --seed 9 > /tmp/gpu-t2.txt 2>/dev/null || return 1
        cmp /tmp/gpu-t2.txt /tmp/gpu-t1.txt || { echo "${m:-embedded} sampled text differs with TOP_MAPPED"; return 1; }
        echo "${m:-embedded} sampled D3 text: top k downloaded == read from mapped memory"
    done
}
check mtp_input_and_top_row_bit_identical mtp_in_equal

# 8f. the one-query attention blocks doing more of the attention themselves give the bits of the launches
#     they replace: the queries' and new keys' norm and RoPE inside the blocks when every sequence has one
#     row (MTPLX_CUDA_FUSE_ATT_PREP=0: k_attn_prep_seqs first) and the merge of a query's key chunks by its
#     last block (MTPLX_CUDA_ATT_MERGE_LAST=0: k_attn_merge after): embedded bf16, logits of 600
#     single-token steps (up to three key chunks a query) and of the MTP head one row at a time, of a
#     600-token prefill, and sampled depth-3 text, both knobs off against on; test_backend_cuda's
#     attention_seqs checks (section 1) compare both with per-sequence attention calls too
att_fuse_equal() {
    local T mode
    T=$(seq -s, 100 7 4300)
    for mode in "" "--step" "--step --mtp"; do
        MTPLX_CUDA_FUSE_ATT_PREP=0 MTPLX_CUDA_ATT_MERGE_LAST=0 build/mtplx logits --tokens $T $mode \
            --out /tmp/gpu-l0.safetensors > /dev/null || return 1
        build/mtplx logits --tokens $T $mode --out /tmp/gpu-l1.safetensors > /dev/null || return 1
        cmp /tmp/gpu-l0.safetensors /tmp/gpu-l1.safetensors || { echo "logits [600 tokens $mode] differ"; return 1; }
        echo "logits [600 tokens $mode]: prep and merge launches == inside the attention blocks"
    done
    MTPLX_CUDA_FUSE_ATT_PREP=0 MTPLX_CUDA_ATT_MERGE_LAST=0 build/mtplx run --prompt "def fib(n):" --max-tokens 96 \
        --depth 3 --draft-min-conf 0 --temperature 0.7 --seed 9 > /tmp/gpu-t0.txt 2>/dev/null || return 1
    build/mtplx run --prompt "def fib(n):" --max-tokens 96 --depth 3 --draft-min-conf 0 --temperature 0.7 --seed 9 \
        > /tmp/gpu-t1.txt 2>/dev/null || return 1
    cmp /tmp/gpu-t0.txt /tmp/gpu-t1.txt || { echo "sampled D3 text differs"; return 1; }
    echo "sampled D3 text: prep and merge launches == inside the attention blocks"
}
check attention_prep_and_merge_in_blocks_bit_identical att_fuse_equal

# 8c. the device MoE's per-slot kernels (calls of up to MTPLX_CUDA_MOE_SLOTS rows: no plan, the combine in the
#     down launch, input rows staged in shared memory) give the tiled kernels' bits: test_backend_cuda's MoE
#     check with SLOTS=4 (its 5..20-row calls tiled, each row compared with the row alone, per slot) and with
#     the tiles everywhere, and logits of a 12-row prefill and of decode steps (and the MTP head) on the MoE
#     goldens with SLOTS=0 and GATE1=0 (router and shared gate in two launches) / default / STAGE=0; the
#     tiled kernels' staging and output loop (TSTAGE=0, TLOOP=1) and tiles of 4 rows (TROWS=4, default 8)
#     against their defaults the same way
moe_slots_equal() {
    local T=11,48,85,122,159,196,233,250,7,99,201,3 m mode
    for m in tests/data/goldens/qwen3_5_moe tests/data/goldens-extra/qwen3_5_moe_b tests/data/goldens/deepseek_v3; do
        for mode in "" "--step" "--step --mtp"; do
            [ "$m" = tests/data/goldens/deepseek_v3 ] && [ "$mode" = "--step --mtp" ] && continue # no MTP head
            MTPLX_CUDA_MOE_SLOTS=0 MTPLX_CUDA_MOE_GATE1=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/gpu-l0.safetensors > /dev/null || return 1
            build/mtplx logits --model $m --tokens $T $mode --out /tmp/gpu-l1.safetensors > /dev/null || return 1
            MTPLX_CUDA_MOE_STAGE=0 build/mtplx logits --model $m --tokens $T $mode --out /tmp/gpu-l2.safetensors > /dev/null || return 1
            MTPLX_CUDA_MOE_SLOTS=0 MTPLX_CUDA_MOE_TSTAGE=0 MTPLX_CUDA_MOE_TLOOP=1 build/mtplx logits --model $m --tokens $T $mode \
                --out /tmp/gpu-l3.safetensors > /dev/null || return 1
            MTPLX_CUDA_MOE_SLOTS=0 MTPLX_CUDA_MOE_TROWS=4 build/mtplx logits --model $m --tokens $T $mode \
                --out /tmp/gpu-l4.safetensors > /dev/null || return 1
            cmp /tmp/gpu-l0.safetensors /tmp/gpu-l1.safetensors && cmp /tmp/gpu-l0.safetensors /tmp/gpu-l2.safetensors &&
                cmp /tmp/gpu-l0.safetensors /tmp/gpu-l3.safetensors && cmp /tmp/gpu-l0.safetensors /tmp/gpu-l4.safetensors ||
                { echo "$m logits [$mode] differ"; return 1; }
            echo "$m logits [$mode]: tiles, two gate launches == staged slots == slots == unstaged tiles, one group a block == tiles of 4 rows"
        done
    done
    MTPLX_CUDA_MOE_SLOTS=4 build/tests/test_backend_cuda && MTPLX_CUDA_MOE_SLOTS=0 build/tests/test_backend_cuda &&
        MTPLX_CUDA_MOE_SLOTS=0 MTPLX_CUDA_MOE_TSTAGE=0 MTPLX_CUDA_MOE_TLOOP=1 build/tests/test_backend_cuda &&
        MTPLX_CUDA_MOE_SLOTS=4 MTPLX_CUDA_MOE_TROWS=4 build/tests/test_backend_cuda
}
check moe_slots_bit_identical moe_slots_equal

# 9. step graphs replayed and patched in place (cuda_graph.cu) generate what eager launches do: sampled
#    text (T 0.6, one seed) at depths 0 and 3 on the embedded model and its q4 conversion, graphs off vs
#    on, and the graphed runs really replayed patched graphs (the step table's counts)
graphs_equal() {
    local m d
    qmodels || return 1
    for m in models/qwen35-tiny-code /tmp/gpu-q4; do
        for d in 0 3; do
            MTPLX_CUDA_GRAPH=0 build/mtplx run --model $m --prompt "$P" --max-tokens 96 --temperature 0.6 --seed 11 \
                --depth $d --quiet > /tmp/gpu-gr0.txt 2>/dev/null || return 1
            MTPLX_CUDA_GRAPH=1 MTPLX_CUDA_STEPS=1 build/mtplx run --model $m --prompt "$P" --max-tokens 96 --temperature 0.6 \
                --seed 11 --depth $d --quiet > /tmp/gpu-gr1.txt 2> /tmp/gpu-gr1.err || return 1
            cmp /tmp/gpu-gr0.txt /tmp/gpu-gr1.txt || { echo "$m depth $d: graphs change the text"; return 1; }
            grep -E "step graphs: [1-9][0-9]* launched, .* [1-9][0-9]* patched in place" /tmp/gpu-gr1.err ||
                { echo "$m depth $d: no patched graph replays"; cat /tmp/gpu-gr1.err; return 1; }
        done
    done
}
check graph_replays_generate_the_same graphs_equal

# 4. memcheck on a short MTP run
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
memcheck() {
    "$SAN" --tool memcheck --error-exitcode 3 --leak-check no build/mtplx run --prompt "$P" --max-tokens 8 \
        --temperature 0 --depth 3 --quiet
}
check compute_sanitizer_memcheck memcheck

echo "gpu-test: $fails failed ($(( $(date +%s) - t0 )) s in all)"
[ $fails -eq 0 ]
