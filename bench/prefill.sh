#!/usr/bin/env bash
# bench/prefill.sh — prefill tokens/s on this machine, mtplx and optionally llama.cpp side by side
# (issue 17; bench/zen.md "Prefill"). Run on an IDLE machine: these are wall-clock figures.
#
#   bash bench/prefill.sh OUT
#   LLAMA_BENCH=/path/to/llama-bench GGUF_EMBEDDED=x.gguf GGUF_SMALL=y.gguf bash bench/prefill.sh OUT
#
# mtplx: `mtplx bench --prefill N --json` (best of 4 prefills) for N = 512 and 4096 on the embedded
# model (models/qwen35-tiny-code) and qwen35-small-code (SMALL, default ../shared/models/...), with
# 1 and 2 threads (THREADS="1 2"), ROUNDS alternations (default 3); plus bench/prefill_bench (CPU
# time and wall, minimum over REPS prefills, and a hash of the last logits row: the same before and
# after a change that keeps the bits). llama.cpp: llama-bench -p 512,4096 -n 0 with the same thread
# counts on the GGUF conversions (bench/zen.md says how they were made; never committed).
# Writes OUT/*.json, OUT/prefill_bench.txt and a summary table OUT/summary.md.
set -euo pipefail
OUT=${1:?usage: bench/prefill.sh OUT}
ROUNDS=${ROUNDS:-3}
REPS=${REPS:-5}
THREADS=${THREADS:-1 2}
SMALL=${SMALL:-../shared/models/qwen35-small-code}
EMBEDDED=${EMBEDDED:-models/qwen35-tiny-code}
mkdir -p "$OUT" build/bench
[ -x build/mtplx ] || make -j2 build/mtplx
LIBS="$(pkg-config --libs jansson libpcre2-8 libutf8proc libmicrohttpd libcurl) -lpthread -lm"
gcc -O2 -std=c17 -D_GNU_SOURCE -pthread -o build/bench/prefill_bench bench/prefill_bench.c build/libmtplx.a $LIBS
{ lscpu | grep -E 'Model name|^CPU\(s\)|Flags' | sed 's/Flags:.*\(avx512_bf16\).*/Flags: ... \1 .../'; uptime; git log -1 --oneline; } > "$OUT/machine.txt"

models="embedded:$EMBEDDED"
[ -d "$SMALL" ] && models="$models small:$SMALL"
for r in $(seq "$ROUNDS"); do
  for m in $models; do
    name=${m%%:*} dir=${m#*:}
    for t in $THREADS; do
      for n in 512 4096; do
        MTPLX_THREADS=$t build/mtplx bench --prefill $n --model "$dir" --json > "$OUT/mtplx-$name-$n-t$t-r$r.json"
        MTPLX_THREADS=$t build/bench/prefill_bench "$dir" $n "$REPS" >> "$OUT/prefill_bench.txt"
      done
    done
  done
done

if [ -n "${LLAMA_BENCH:-}" ]; then
  for g in ${GGUF_EMBEDDED:+embedded:$GGUF_EMBEDDED} ${GGUF_SMALL:+small:$GGUF_SMALL}; do
    name=${g%%:*} file=${g#*:}
    for t in $THREADS; do
      "$LLAMA_BENCH" -m "$file" -t "$t" -p 512,4096 -n 0 -r "$ROUNDS" -o json > "$OUT/llama-$name-t$t.json"
    done
  done
fi

# summary: best tok/s over the rounds per (model, N, threads); llama.cpp's avg_ts per test
/usr/bin/python3 - "$OUT" <<'PY'
import glob, json, os, re, sys
out = sys.argv[1]
best = {}
for f in glob.glob(os.path.join(out, "mtplx-*.json")):
    m = re.match(r"mtplx-(\w+)-(\d+)-t(\d+)-r\d+\.json", os.path.basename(f))
    try:
        tok_s = json.load(open(f))["prefill"]["tok_s"]
    except Exception:
        continue
    k = (m.group(1), int(m.group(2)), int(m.group(3)))
    best[k] = max(best.get(k, 0), tok_s)
llama = {}
for f in glob.glob(os.path.join(out, "llama-*.json")):
    m = re.match(r"llama-(\w+)-t(\d+)\.json", os.path.basename(f))
    for row in json.load(open(f)):
        if row.get("n_gen", 0) == 0:
            llama[(m.group(1), int(row["n_prompt"]), int(m.group(2)))] = row["avg_ts"]
lines = ["| model | prompt | threads | mtplx tok/s | llama.cpp tok/s | ratio |", "|---|---|---|---|---|---|"]
for k in sorted(best):
    l = llama.get(k)
    lines.append("| %s | %d | %d | %.0f | %s | %s |" % (k[0], k[1], k[2], best[k], "%.0f" % l if l else "",
                 "%.2fx" % (best[k] / l) if l else ""))
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
