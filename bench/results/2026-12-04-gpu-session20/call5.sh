#!/usr/bin/env bash
# session 20 call 5: attention blocks taking one KV head's queries together (MTPLX_CUDA_ATT_GROUP, default 1)
# vs one query a block (=0): gpu-test (its new check compares both bit for bit), serve's calibration on the
# random small shape, per-op profile of 32-row forwards, embedded bench D3, small shape 4-row verify at
# long context, alternated
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
scripts/device-build.sh build CUDA=1 model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
timeout 300 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(el) s" | tee -a $L
grep -E "^(PASS|FAIL)|failed" $OUT/gpu-test.txt | tr '\n' ' ' | cut -c1-2000 | tee -a $L
grep -B2 -A6 "FAIL" $OUT/gpu-test.txt | head -40 | tee -a $L
M=/tmp/smsyn
rm -rf $M; build/mtplx synth --config bench/configs/qwen35-small-code.json --out $M --quiet
cp models/qwen35-tiny-code/{tokenizer_config.json,generation_config.json} $M/; for f in tokenizer.json val_code.txt; do xz -dc models/qwen35-tiny-code/$f.xz > $M/$f; done
T=$(seq -s, 11 7 4000)
for g in 0 1; do MTPLX_CUDA_ATT_GROUP=$g build/mtplx logits --model $M --tokens $T --out /tmp/a$g.st > /dev/null; done
cmp /tmp/a0.st /tmp/a1.st && echo "smsyn 570-token logits ATT_GROUP 0 == 1" | tee -a $L || echo "DIFFER smsyn" | tee -a $L
cal() { # $1 model, $2.. env
  local m=$1; shift
  env "$@" MTPLX_SCHED_VERBOSE=1 build/mtplx serve --model $m --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/s.err & pid=$!
  for _ in $(seq 1 300); do grep -q listening /tmp/s.out && break; sleep 0.1; done
  kill -INT $pid; wait $pid
  echo "$(basename $m) [$*] $(grep 'at start' /tmp/s.err | grep -E '4\+ rows|MTP step' | sed 's/.*depth policy at start: //; s/gap after.*//' | tr '\n' ' ')" | tee -a $L
}
for r in 1 2; do for g in 1 0; do cal $M MTPLX_CUDA_ATT_GROUP=$g; done; done
for r in 1 2; do for g in 1 0; do
  echo "sm verify ctx 2048 ATT_GROUP=$g: $(MTPLX_CUDA_ATT_GROUP=$g timeout 60 build/mtplx bench --device cuda --model $M --verify-cost --rows 8 --reps 5 --context 2048 --logits-top 20 2>&1 | grep -E ' (1|4|8)-row forward' | sed 's/ (.*x 1-row)//; s/-row forward//' | tr -s ' ' | tr '\n' '|')" | tee -a $L
done; done
prof() { # $1 ATT_GROUP
  MTPLX_CUDA_ATT_GROUP=$1 MTPLX_CUDA_PROFILE=1 MTPLX_CUDA_PROFILE_ROWS=32 build/mtplx serve --model $M --port 0 --quiet --max-seqs 64 --device cuda > /tmp/s.out 2>/tmp/p.err & pid=$!
  port=; for _ in $(seq 1 300); do port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/s.out); [ -n "$port" ] && break; sleep 0.1; done
  timeout 60 python3 bench/streams.py http://127.0.0.1:$port --max-tokens 512 --streams 8 --depth 3 --rounds 2 --warmup 1 2>&1 | tail -1 | tee -a $L
  kill -INT $pid; wait $pid
  echo "== profile 32-row forwards ATT_GROUP=$1" | tee -a $L; grep -A16 "CUDA profile" /tmp/p.err | grep -E "attention|matmul |in all" | tee -a $L
}
prof 1; prof 0
B="bench --device cuda --depths 0,3 --temperature 0.6 --prompts 8"
for r in 1 2; do for g in 1 0; do
  echo "== emb ATT_GROUP=$g: $(MTPLX_CUDA_ATT_GROUP=$g build/mtplx $B 2>&1 | grep -E '^(AR|D3) ' | awk '{print $1, $2, "verify", $7, "draft", $6}' | tr '\n' '|')" | tee -a $L
done; done
echo "total $(el) s" | tee -a $L
