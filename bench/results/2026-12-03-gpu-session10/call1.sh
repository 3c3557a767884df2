#!/usr/bin/env bash
# session 10 call 1 (lead): where a many-row trunk step goes on the small model's shape (synthetic weights),
# per rows (MTPLX_CUDA_STEPS, MTPLX_CUDA_PROFILE_ROWS), the embedded model too; 27B-16l verify with --logits-top 20
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
scripts/device-build.sh build model build/mtplx CUDA=1 > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt; exit 1; }
echo "build $(( $(date +%s)-t0 )) s" | tee -a $L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a $L
S=/tmp/small; build/mtplx synth --config .gpu-lead/small-config.json --out $S --quiet
E=models/qwen35-tiny-code
for m in $S $E; do n=$(basename $m)
  MTPLX_CUDA_STEPS=1 build/mtplx bench --device cuda --model $m --verify-cost --rows 32 --reps 5 --context 512 --logits-top 20 > $OUT/steps-$n.txt 2>&1
  for r in 1 4 8 16 32; do echo "== rows $r" ; MTPLX_CUDA_PROFILE=2 MTPLX_CUDA_PROFILE_ROWS=$r build/mtplx bench --device cuda --model $m --verify-cost --rows 32 --reps 5 --context 512 --logits-top 20 2>&1 | sed -n '/CUDA profile/,/^device/p'; done > $OUT/prof-$n.txt
  echo "$n done $(( $(date +%s)-t0 )) s" | tee -a $L
done
B=/tmp/b27; timeout 200 build/mtplx synth --preset qwen35-27b-16l --dtype bf16 --out $B --quiet; echo "synth27 $(( $(date +%s)-t0 )) s" | tee -a $L
for k in 0 20; do a=; [ $k = 20 ] && a="--logits-top 20"
  timeout 120 build/mtplx bench --device cuda --model $B --membw --verify-cost --rows 8 --reps 5 --context 512 $a 2>&1 | tail -12 | tee -a $L; done
echo "total $(( $(date +%s)-t0 )) s" | tee -a $L
