#!/usr/bin/env bash
# session 28 call 2 (not run: no device was lent; for the next session with one): the GPU machine's
# 16-core Intel Xeon host, where a 1-row matmul is cut into many more pool pieces than on a 2-vCPU VM.
# bench/knob_ab.c on bench-2b q4 decode: home ranges (MTPLX_MM_RANGES) and the page lead (off by default
# on Intel) each against the default, at 16 and 8 threads, rounds split by the host's read rate.
set -uo pipefail
t0=$(date +%s); L=$OUT/log.txt
el() { echo $(( $(date +%s)-t0 )); }
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a $L
scripts/device-build.sh build model build/mtplx > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
P=/tmp/mtplx-devdeps; LIBS="-L$P/usr/lib/x86_64-linux-gnu -Wl,-rpath,$P/usr/lib/x86_64-linux-gnu -ljansson -lpcre2-8 -lutf8proc -lmicrohttpd -l:libcurl.so.4 -lm"
mkdir -p build/bench && gcc -O2 -std=c17 -D_GNU_SOURCE -pthread -I$P/usr/include -o build/bench/knob_ab bench/knob_ab.c build/libmtplx.a $LIBS || exit 1
build/mtplx synth --preset bench-2b --dtype q4 --out /tmp/b2q4 --quiet
echo "built $(el) s" | tee -a $L
for th in 16 8; do
  echo "== $th threads: home ranges (B) vs pieces (A)" | tee -a $L
  MTPLX_THREADS=$th build/bench/knob_ab /tmp/b2q4 60 mm_ranges=0 mm_ranges=1 60 | tail -2 | tee -a $L
  echo "== $th threads: page lead 8 KiB (B) vs none (A)" | tee -a $L
  MTPLX_THREADS=$th build/bench/knob_ab /tmp/b2q4 60 page_lead=0 page_lead=8192 60 | tail -2 | tee -a $L
done
MTPLX_THREADS=16 build/mtplx bench --membw --membw-mb 1024 --verify-cost --rows 1 --reps 15 --context 64 --model /tmp/b2q4 2>&1 | tail -3 | tee -a $L
echo "done $(el) s" | tee -a $L
