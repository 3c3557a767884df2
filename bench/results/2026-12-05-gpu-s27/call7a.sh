#!/usr/bin/env bash
# session 27 call 7a: build HEAD and keep the small model's first half in /tmp (call 7b brings the second).
# The halves were carried as .gpu-lead/part00 / part01 (untracked) with models/qwen35-tiny-code, tests/data
# and bench/results moved out of the working tree for calls 7a-7b, so that each fit the 64 MiB limit:
#   tar cf - qwen35-small-code/{config.json,generation_config.json,model-*.safetensors,
#     model.safetensors.index.json,tokenizer.json,tokenizer_config.json} | xz -T2 -3 | split -b 56507022
mkdir -p /tmp/smx && cp .gpu-lead/part00 /tmp/smx/
scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
ls -la /tmp/smx build/mtplx
