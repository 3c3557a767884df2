#!/usr/bin/env bash
# session 32, run by hand on call 4's warm machine after call4.sh (tree as call 4: per-slot kernels, unstaged,
# default MTPLX_CUDA_MOE_SLOTS=4); output in call4-extra-log.txt.
M=/tmp/moe/q4
# (1) the per-slot path beyond 4 rows
for q in 16 4 16; do echo "SLOTS=$q: $(MTPLX_CUDA_MOE_SLOTS=$q timeout 60 build/mtplx bench --device cuda --membw --verify-cost --rows 8 --reps 5 --context 512 --model $M 2>&1 | grep -E 'row forward|tok/s' | tr -s ' ' | tr '\n' ' ')"; done
T=11,48,85,122,159,196,233,250,7,99,201,3
MTPLX_DEVICE=cuda MTPLX_CUDA_MOE_SLOTS=0 build/mtplx logits --model $M --tokens $T --out /tmp/l0.st > /dev/null 2>&1
MTPLX_DEVICE=cuda MTPLX_CUDA_MOE_SLOTS=16 build/mtplx logits --model $M --tokens $T --out /tmp/l1.st > /dev/null 2>&1
cmp /tmp/l0.st /tmp/l1.st && echo "prefill 12 rows: tiles == slots16"
# (2) up to 32 rows
for q in 64 0; do echo "SLOTS=$q: $(MTPLX_CUDA_MOE_SLOTS=$q timeout 60 build/mtplx bench --device cuda --verify-cost --rows 32 --reps 3 --context 512 --model $M 2>&1 | grep -E ' (1|8|12|16|20|24|28|32)-row forward' | tr -s ' ' | tr '\n' ' ')"; done
# (3) kernel durations (call4-ncu-r1.txt) and the per-slot kernels' sections (call4-ncu-full.txt)
ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel build/mtplx bench --device cuda --model $M --verify-cost --rows 1 --reps 3 --context 16
ncu --clock-control none -k regex:"k_moe_gu_slot|k_moe_down_slots|k_moe_route" --launch-skip 20 --launch-count 3 --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis build/mtplx bench --device cuda --model $M --verify-cost --rows 1 --reps 3 --context 16
