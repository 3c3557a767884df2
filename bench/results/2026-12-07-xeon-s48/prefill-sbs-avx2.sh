#!/usr/bin/env bash
# session 48 (lead): prefill-sbs.sh again on the AVX2-only paths of both, as on an AVX2-only machine: mtplx
# with MTPLX_KERNEL=avx2 MTPLX_AVXVNNI=0; llama.cpp d32676d's ggml-cpu rebuilt with -DGGML_NATIVE=OFF
# -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON (no AVX-512, no AVX-VNNI) in /tmp/llama-cpu/b-avx2
# and loaded through LD_LIBRARY_PATH by the same llama-bench. Same models, GGUFs, lengths and alternation;
# Intel Xeon without AMX, 2 vCPUs, idle. Nothing of llama.cpp is committed.
MENV="MTPLX_KERNEL=avx2 MTPLX_AVXVNNI=0" LENV="LD_LIBRARY_PATH=/tmp/llama-cpu/b-avx2/bin" SBS=sbs-avx2.txt \
    exec bash "$(dirname "$0")/prefill-sbs.sh" "$@"
