#!/usr/bin/env bash
# Session 39, call 8: `serve` on the GPU, embedded model, with the new default for requests that set no
# depth (adaptive depth 6, min conf 0.4) against `--depth 3` (a fixed depth, the default before): one stream
# and 8 streams (bench/streams.py: T 0.6 top-p 0.95 top-k 20, 256 tokens, code prompts), a fresh server each,
# alternated.
set -uo pipefail
export MTPLX_DEVICE=cuda
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "[$(el) s] built"
for round in 1 2; do
    for mode in default d3; do
        extra=""; [ $mode = d3 ] && extra="--depth 3"
        build/mtplx serve --port 0 --quiet --max-seqs 8 $extra > /tmp/srv.out 2>&1 &
        pid=$!
        for i in $(seq 100); do grep -q listening /tmp/srv.out && break; sleep 0.1; done
        P=$(grep -o '127.0.0.1:[0-9]*' /tmp/srv.out | cut -d: -f2)
        for n in 1 8; do
            echo "[$(el) s] $mode $(python3 bench/streams.py http://127.0.0.1:$P --streams $n --max-tokens 256 --rounds 6 --warmup 1 2>&1 | grep 'mean aggregate')"
        done
        kill $pid; wait $pid 2>/dev/null
    done
done
echo "[$(el) s] ALL DONE"
