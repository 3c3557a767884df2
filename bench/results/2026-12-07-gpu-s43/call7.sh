# session 43, call 7 (warm): stall samples by source line (ncu, sampling every 32 cycles, caches kept) of one
# launch each of the draft step's slow kernels and the AR step's GDN, on the tree with the attention cut.
set -uo pipefail
export MTPLX_DEVICE=cuda
[ -x build/mtplx ] || scripts/device-build.sh build CUDA=1 model build/mtplx > /tmp/build.txt 2>&1
R="build/mtplx bench --device cuda --prompts 1 --max-tokens 64 --repeats 1 --depths 8@0.4 --temperature 0.6"
for k in k_attn_core_seqs_fp k_top_row k_sk_qdp k_gdn_reg_seqs k_embed_norm_pair; do
  ncu --clock-control none --cache-control none --set full --import-source yes --warp-sampling-interval 0 -k regex:$k \
      --launch-skip 40 --launch-count 1 -o /tmp/$k -f $R > /dev/null 2>&1
  ncu -i /tmp/$k.ncu-rep --page source --print-source cuda,sass --csv > $OUT/src-$k.csv 2>&1
  ncu -i /tmp/$k.ncu-rep --page details > $OUT/details-$k.txt 2>&1
  grep -E "^  [a-z_ ]*k_|Duration|Grid Size|Block Size|Registers Per" $OUT/details-$k.txt | head -6
done
gzip $OUT/*.csv
