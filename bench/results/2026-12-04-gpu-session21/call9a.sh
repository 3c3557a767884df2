#!/usr/bin/env bash
# session 21 call 9a: build HEAD and take the small model's first half (call 9b brings the second)
mkdir -p /tmp/smx && cp .gpu-lead/sma/part00 /tmp/smx/
scripts/device-build.sh build CUDA=1 build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
ls -la /tmp/smx build/mtplx
