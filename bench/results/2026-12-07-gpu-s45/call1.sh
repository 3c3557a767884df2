# Session 45 call 1: the round-trip micro-benchmark (rt.cu), then session 44's prepared call5.sh (norm-last.patch).
set -uo pipefail
D=bench/results/2026-12-07-gpu-s45
nvcc -O3 -arch=sm_90 $D/rt.cu -o /tmp/rt && /tmp/rt | tee $OUT/rt.txt
bash bench/results/2026-12-07-gpu-s44/call5.sh
