#!/usr/bin/env bash
# Session 34: llama.cpp d32676d's own MTP (llama-server --spec-type draft-mtp) beside mtplx's on this VM's CPU,
# embedded model, bf16 / Q8_0 / Q4_0 (mtplx: MLX affine q8 / q4 g64 from `mtplx convert`), 2 threads each,
# alternated in two rounds. llama.cpp was built from the fetched snapshot in /tmp (not in the repo; bench/zen.md
# "Session 34" says how) and its GGUFs converted with its own converter; LB and G point at them.
# Decode figures are from the same prompts and sampler (bench/peer_spec.py).
set -uo pipefail
LB=${LB:-/tmp/lcb/bin}; G=${G:-/tmp/gg}; M=models/qwen35-tiny-code; OUT=${1:-/tmp/peer-cpu}; mkdir -p $OUT
L=$OUT/log.txt
for b in 8 4; do
  [ -d /tmp/emb-q$b ] || { build/mtplx convert --q-bits $b --out /tmp/emb-q$b --model $M --quiet && cp $M/val_code.txt $M/generation_config.json /tmp/emb-q$b/; }
done
srv() { # srv NAME GGUF [args...]
  local name=$1 gguf=$2; shift 2; local log=/tmp/srv-${name// /_}.log
  $LB/llama-server -m $gguf -c 4096 -np 1 -t 2 --port 18080 "$@" > $log 2>&1 & local pid=$!
  python3 -c "import time,urllib.request as u
for _ in range(240):
  try: u.urlopen('http://127.0.0.1:18080/health',timeout=2); break
  except Exception: time.sleep(0.5)"
  timeout 600 python3 bench/peer_spec.py http://127.0.0.1:18080 --model $MD --label "$name" 2>&1 | tee -a $L
  kill $pid; wait $pid 2>/dev/null
}
for r in 1 2; do
  for f in bf16 q8_0 q4_0; do
    case $f in bf16) MD=$M;; q8_0) MD=/tmp/emb-q8;; q4_0) MD=/tmp/emb-q4;; esac
    echo "round $r $f mtplx: $(MTPLX_THREADS=2 build/mtplx bench --model $MD --depths 0,2,3,4 2>&1 | grep -E '^(AR|D[0-9])' | awk '{print $1, $2, $3, $4}' | tr '\n' ' ')" | tee -a $L
    srv "llama $f AR r$r" $G/emb-$f.gguf
    for n in 2 3; do srv "llama $f draft-mtp n$n r$r" $G/emb-$f.gguf --spec-type draft-mtp --spec-draft-n-max $n; done
  done
done
for f in bf16 q8_0 q4_0; do $LB/llama-bench -m $G/emb-$f.gguf -t 2 -p 512 -n 128 -r 3 2>&1 | grep -E "\| *(tg|pp)" | tee -a $L; done
