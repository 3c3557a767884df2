#!/usr/bin/env bash
# session 10 call 2 (lead): gpu-test on the tiled attention + prefetching GDN step + logits lists; old vs new
# speed (embedded, small shape); the 27B's sampler with logits lists on / off; 27B top-k steps; ncu per kernel
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
B() { scripts/device-build.sh build "$@" CUDA=1 > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }; }
patch -R -p1 < .gpu-lead/att.patch > /dev/null && B build/mtplx && cp build/mtplx /tmp/old
patch -p1 < .gpu-lead/att.patch > /dev/null
echo "old build $(( $(date +%s)-t0 )) s" | tee -a $L
timeout 300 bash scripts/gpu-test.sh > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$? $(( $(date +%s)-t0 )) s" | tee -a $L
grep -E "^(PASS|FAIL)" $OUT/gpu-test.txt | tail -30 | tee -a $L
S=/tmp/small; build/mtplx synth --config .gpu-lead/small-config.json --out $S --quiet
E=models/qwen35-tiny-code
for m in $E $S; do for ctx in 512 4000; do for b in /tmp/old build/mtplx /tmp/old build/mtplx; do
  echo "== $b $(basename $m) ctx $ctx: $($b bench --device cuda --model $m --verify-cost --rows 8 --reps 5 --context $ctx 2>&1 | grep -E 'forward' | awk '{printf "%s ", $3}')" | tee -a $L
done; done; done
for b in /tmp/old build/mtplx; do echo "== $b emb D0,3"; $b bench --device cuda --model $E --depths 0,3 2>&1 | tail -3; done | tee -a $L
for b in /tmp/old build/mtplx; do echo "== $b emb prefill 4096: $($b bench --device cuda --model $E --prefill 4096 2>&1 | tail -1)"; done | tee -a $L
echo "ab $(( $(date +%s)-t0 )) s" | tee -a $L
W=/tmp/b27; timeout 100 build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out $W --quiet; echo "synth27 $(( $(date +%s)-t0 )) s" | tee -a $L
for d in 0 3; do for Ls in 0 1; do echo "== 27B lists=$Ls D$d T0.6: $(MTPLX_SAMPLER_LISTS=$Ls timeout 60 build/mtplx run --device cuda --model $W --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 200 --depth $d --temperature 0.6 --top-k 20 --top-p 0.95 2>&1 | tail -1)"; done; done | tee -a $L
for k in 0 20; do a=; [ $k = 20 ] && a="--logits-top 20"
  MTPLX_CUDA_STEPS=1 timeout 100 build/mtplx bench --device cuda --model $W --verify-cost --rows 4 --reps 5 --context 512 $a > $OUT/steps27-top$k.txt 2>&1; done
echo "27b $(( $(date +%s)-t0 )) s" | tee -a $L
NCU="ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel"
timeout 90 $NCU build/mtplx bench --device cuda --model $S --verify-cost --rows 1 --reps 3 --context 512 --logits-top 20 > $OUT/ncu-small-r1.txt 2>&1
timeout 60 $NCU -k regex:top build/mtplx bench --device cuda --model $W --verify-cost --rows 2 --reps 2 --context 512 --logits-top 20 > $OUT/ncu27-top.txt 2>&1
echo "total $(( $(date +%s)-t0 )) s" | tee -a $L
