# session 43, call 4 (warm): why a one-row attention block takes 14-17 us on ~64-320 keys (ncu --set full
# of one k_attn_core_seqs_fp launch and one k_gdn_reg_seqs launch, caches kept), outputs under $OUT.
set -uo pipefail
export MTPLX_DEVICE=cuda
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/build.txt 2>&1
R="build/mtplx bench --device cuda --prompts 1 --max-tokens 64 --repeats 1 --depths 8@0.4 --temperature 0.6"
for k in k_attn_core_seqs_fp k_gdn_reg_seqs; do
  ncu --clock-control none --cache-control none --set full -k regex:$k --launch-skip 30 --launch-count 1 $R > $OUT/full-$k.txt 2>&1
  grep -E "Duration|Elapsed Cycles|SM Active Cycles|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issue Slots Busy|Stall|stall|Est. Speedup|Block Limit|Threads  " $OUT/full-$k.txt | head -40
done
