#!/usr/bin/env bash
# lead's final device run, session 4 (merged main): gpu-test; embedded streams through serve (after the
# batched sequence ops); MTP bench graphs off (default) / on; the transformers peer on the embedded model.
set -uo pipefail
touch src/backend/cuda/* src/engine/*.c src/model/*.c src/model/families/*.c src/kernels/*.c src/backend/*.c src/backend/cpu/*.c
timeout 330 scripts/gpu-test.sh 2>&1 | tee $OUT/gpu-test.txt
echo "+ streams, embedded model, cuda, knee 64 (GPU default), depth 3"
build/mtplx serve --model models/qwen35-tiny-code --port 0 --quiet --max-seqs 64 --depth 3 > /tmp/s.out 2>/tmp/s.err & pid=$!
port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
[ -n "$port" ] && timeout 60 python3 bench/streams.py http://127.0.0.1:$port --streams 1,8,16,64 --max-tokens 256 --rounds 2 2>&1 | tee $OUT/streams-emb.txt
kill $pid; wait $pid
for g in 0 1 0 1; do echo "+ MTP embedded, MTPLX_CUDA_GRAPH=$g"; MTPLX_CUDA_GRAPH=$g timeout 40 build/mtplx bench --device cuda --depths 0,3 2>&1 | tail -4; done | tee $OUT/bench-mtp-emb.txt
echo "+ transformers peer, embedded"; timeout 90 python3 bench/hf_peer.py models/qwen35-tiny-code --prefill 512,4096 2>&1 | tail -14 | tee $OUT/hf-emb.txt
echo "+ mtplx prefill embedded, cuda"; for n in 512 4096; do timeout 30 build/mtplx bench --device cuda --prefill $n 2>&1 | tail -1; done | tee $OUT/prefill-emb.txt
