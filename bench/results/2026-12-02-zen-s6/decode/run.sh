cd /work/main; O=/tmp/s6zen/decode
{ uptime; git log -1 --oneline; } > $O/machine.txt
for r in 1 2; do for F in q4 q8; do
  build/mtplx bench --membw --verify-cost --rows 4 --reps 7 --context 256 --model /tmp/bench-2b-$F --json > $O/model-$F-new-r$r.json 2> $O/model-$F-new-r$r.err
  MTPLX_QPACK_PF=4096 MTPLX_QPACK_PF2=16384 build/mtplx bench --membw --verify-cost --rows 4 --reps 7 --context 256 --model /tmp/bench-2b-$F --json > $O/model-$F-oldpf-r$r.json 2> $O/model-$F-oldpf-r$r.err
done; done
build/mtplx bench --membw --verify-cost --rows 4 --reps 5 --context 256 --model /tmp/bench-2b-bf16 --json > $O/model-bf16.json 2> $O/model-bf16.err
echo done
