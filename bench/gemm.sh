#!/usr/bin/env bash
# bench/gemm.sh — the bf16 matmul with many rows, in CPU time (bench/gemm.md; bench/gemm_bench.c).
#   bash bench/gemm.sh [OUT]            this tree's build/libmtplx.a
#   BASE_LIB=/path/libmtplx.a bash bench/gemm.sh OUT
#                                       also a base build (e.g. main's), rounds alternating
# One thread (MTPLX_THREADS=1, the thread's CPU clock); each figure is a minimum over repeats, so
# other load on a shared machine can only make it worse, never better. ROUNDS (default 3) alternations.
set -euo pipefail
OUT=${1:-/tmp/gemm-bench}
ROUNDS=${ROUNDS:-3}
SMALL=${SMALL:-../shared/models/qwen35-small-code}
TINY=${TINY:-models/qwen35-tiny-code}
mkdir -p "$OUT" build/bench
LIBS="$(pkg-config --libs jansson libpcre2-8 libutf8proc libmicrohttpd libcurl) -lpthread -lm"
build() { gcc -O2 -std=c17 -D_GNU_SOURCE -pthread -o "$1" bench/gemm_bench.c "$2" $LIBS; }
build build/bench/gemm_bench build/libmtplx.a
VARIANTS="new"
if [ -n "${BASE_LIB:-}" ]; then build build/bench/gemm_bench_base "$BASE_LIB"; VARIANTS="base new"; fi
T="1 4 8 16 32 40 512"
for r in $(seq "$ROUNDS"); do
  for v in $VARIANTS; do
    bin=build/bench/gemm_bench; [ "$v" = base ] && bin=build/bench/gemm_bench_base
    {
      # small model: gate/up, down, qkv (16 of each streamed from memory), the tied LM head
      MTPLX_THREADS=1 $bin matmul 1920 640 16 5 $T
      MTPLX_THREADS=1 $bin matmul 640 1920 16 5 $T
      MTPLX_THREADS=1 $bin matmul 1280 640 16 5 $T
      MTPLX_THREADS=1 $bin matmul 8192 640 1 5 $T
      # embedded model: gate/up, down, LM head
      MTPLX_THREADS=1 $bin matmul 1024 512 16 5 $T
      MTPLX_THREADS=1 $bin matmul 512 1024 16 5 $T
      MTPLX_THREADS=1 $bin matmul 8192 512 1 5 $T
      MTPLX_THREADS=1 $bin forward "$SMALL" 9 1 8 16 40 | sed 's/^/small /'
      [ -e "$TINY/model-00001-of-00004.safetensors" ] && MTPLX_THREADS=1 $bin forward "$TINY" 9 1 8 16 40 | sed 's/^/tiny /'
    } > "$OUT/$v.$r.txt"
  done
done
echo "raw: $OUT/{$(echo $VARIANTS | tr ' ' ,)}.{1..$ROUNDS}.txt (take the minimum per line over rounds)"
