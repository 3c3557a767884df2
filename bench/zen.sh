#!/usr/bin/env bash
# bench/zen.sh — issue 17 on an AMD Zen (AVX-512 + VNNI + BF16, no AMX), to be run on the IDLE
# machine (helper "zen" could only count instructions / CPU time on the shared, loaded VM).
# Fills the pending cells of bench/zen.md. Usage, from the repository root after `make`:
#   bash bench/zen.sh OUTDIR [steps...]     steps: kernels model load mtp prefill llama (default all
#                                           but llama)
# Env: MTPLX (binary, default build/mtplx), B2B_DIR (bench-2b checkpoints, default /tmp; synthesized
# when missing), THREADS (default 2), LLAMA (a llama.cpp build dir, for the llama step).
set -u
out=${1:?output dir}; shift
steps=${*:-kernels model load mtp prefill}
bin=${MTPLX:-build/mtplx}
dir=${B2B_DIR:-/tmp}
th=${THREADS:-2}
mkdir -p "$out"
{ date -u; nproc; lscpu | grep -E "Model name|^CPU\(s\)|L3"; grep -o -w -E "avx512_bf16|avx512_vnni|amx_bf16" /proc/cpuinfo | sort -u; uptime; } > "$out/machine.txt"
for f in q4 q8 bf16; do
    [ -f "$dir/bench-2b-$f/model.safetensors.index.json" ] || "$bin" synth --preset bench-2b --dtype $f --out "$dir/bench-2b-$f" --quiet
done
has() { case " $steps " in *" $1 "*) return 0;; esac; return 1; }
export MTPLX_THREADS=$th

# 1. the matmul kernels alone: bf16 through the AVX512-BF16 kernel (default) and the FMA kernel,
#    T = 1..8 (verify rows); q8 / q4 repacked (VNNI) and the MLX-layout kernel; AVX2-only path
if has kernels; then
    for f in bf16 q8 q4; do
        for v in default avx2; do
            e=(); [ $v = avx2 ] && e=(MTPLX_KERNEL=avx2)
            env "${e[@]}" "$bin" bench --matmul $f --rows 8 --reps 9 --json > "$out/matmul-$f-$v.json"
        done
    done
    MTPLX_BF16DP=0 "$bin" bench --matmul bf16 --rows 8 --reps 9 --json > "$out/matmul-bf16-fma.json"
    MTPLX_BF16_PF=0 "$bin" bench --matmul bf16 --rows 8 --reps 9 --json > "$out/matmul-bf16-nopf.json"
    MTPLX_QPACK=0 "$bin" bench --matmul q4 --rows 8 --reps 9 --json > "$out/matmul-q4-noqpack.json"
    # q8 was 63% of bandwidth on Zen 5 (issue 17): sweep the VNNI kernel's prefetch distances
    for pf in 0 2048 4096 8192; do for pf2 in 0 16384 32768; do
        MTPLX_QPACK_PF=$pf MTPLX_QPACK_PF2=$pf2 "$bin" bench --matmul q8 --rows 1 --reps 9 --json > "$out/matmul-q8-pf$pf-$pf2.json"
    done; done
fi

# 2. whole model: AR decode as a fraction of the same-run bandwidth, verify cost R = 1..8 (4 rows
#    must be <= 1.25x one row), prefill 2k; bf16 also with the FMA kernel; every format on AVX2;
#    q4 also with the pack cache off (the cached copy is mapped on 4 KiB pages: decode must not lose)
if has model; then
    for f in q4 q8 bf16; do
        "$bin" bench --membw --verify-cost --rows 8 --reps 9 --context 256 --prefill 2048 --model "$dir/bench-2b-$f" --json > "$out/model-$f.json"
        MTPLX_KERNEL=avx2 "$bin" bench --membw --verify-cost --rows 4 --reps 9 --context 256 --model "$dir/bench-2b-$f" --json > "$out/model-$f-avx2.json"
    done
    MTPLX_BF16DP=0 "$bin" bench --membw --verify-cost --rows 4 --reps 9 --context 256 --model "$dir/bench-2b-bf16" --json > "$out/model-bf16-fma.json"
    MTPLX_PACK_CACHE=0 "$bin" bench --membw --verify-cost --rows 4 --reps 9 --context 256 --model "$dir/bench-2b-q4" --json > "$out/model-q4-nocache.json"
fi

# 3. load + first token, warm page cache: a first load that fills the pack cache, then 3 loads
#    that map it; the same with the cache off (the old path); per format
if has load; then
    cache=$out/qpack-cache
    for f in q4 q8 bf16; do
        ck=$dir/bench-2b-$f
        cat "$ck"/*.safetensors > /dev/null
        rm -rf "$cache"
        for i in fill 1 2 3; do
            MTPLX_PACK_CACHE=$cache /usr/bin/time -f "$f cache-$i %e s wall %U user %S sys" \
                "$bin" run --model "$ck" --prompt-tokens 1,2,3 --max-tokens 1 --quiet > /dev/null 2>> "$out/load.txt"
        done
        for i in 1 2; do
            MTPLX_PACK_CACHE=0 /usr/bin/time -f "$f nocache-$i %e s wall %U user %S sys" \
                "$bin" run --model "$ck" --prompt-tokens 1,2,3 --max-tokens 1 --quiet > /dev/null 2>> "$out/load.txt"
        done
        MTPLX_PACK_CACHE=$cache /usr/bin/time -f "$f cache-nodraftquant %e s wall %U user %S sys" \
            "$bin" run --model "$ck" --prompt-tokens 1,2,3 --max-tokens 1 --quiet --draft-quant none > /dev/null 2>> "$out/load.txt"
    done
    cat "$out/load.txt"
fi

# 4. MTP on the embedded model, T 0.6 (must be >= 2.0x AR)
if has mtp; then
    "$bin" bench --depths 0,2,3,4 --temperature 0.6 --prompts 8 --repeats 3 --json > "$out/mtp-embedded.json"
fi

# 5. prefill, 512 and 4096 tokens (bench-2b per format; the embedded model)
if has prefill; then
    for f in q4 q8 bf16; do for n in 512 4096; do
        "$bin" bench --prefill $n --model "$dir/bench-2b-$f" --json > "$out/prefill-$f-$n.json"
    done; done
    for n in 512 4096; do "$bin" bench --prefill $n --json > "$out/prefill-embedded-$n.json"; done
fi

# 6. llama.cpp side by side (never committed; see bench/zen.md for the build and the conversion)
if has llama; then
    L=${LLAMA:?LLAMA=llama.cpp build dir}
    for g in "$out"/gguf/*.gguf; do
        "$L/bin/llama-bench" -m "$g" -t "$th" -p 512,4096 -n 32 -r 3 -o json > "$out/llama-$(basename "$g" .gguf).json"
    done
fi
