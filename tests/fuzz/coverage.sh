#!/usr/bin/env bash
# coverage.sh — line and region coverage of the fuzzed source files when every fuzz harness replays
# its committed corpus (tests/fuzz/corpus/NAME/) once: clang's source-based coverage
# (-fprofile-instr-generate -fcoverage-mapping, build/cov/ in the Makefile), llvm-profdata merge,
# llvm-cov report. Prints a markdown table (bench/fuzz.md records one) and leaves
#   build/cov/fuzz.profdata   the merged profile of every harness
#   build/cov/report.txt      llvm-cov's own report
# so that e.g. `llvm-cov show build/cov/fuzz_jinja -instr-profile build/cov/fuzz.profdata src/chat/jinja_eval.c`
# shows the lines no input reaches. Usage, from anywhere: bash tests/fuzz/coverage.sh [NAME...]
# (default every harness). Needs clang and llvm (Debian 12: clang-14, llvm-14).
set -eu
cd "$(dirname "$0")/../.."
names=()
if [ $# -gt 0 ]; then names=("$@"); else
    for s in tests/fuzz/fuzz_*.c; do n=$(basename "$s" .c); names+=("${n#fuzz_}"); done
fi
profdata=$(command -v llvm-profdata || command -v llvm-profdata-14 || true)
cov=$(command -v llvm-cov || command -v llvm-cov-14 || true)
[ -n "$profdata" ] && [ -n "$cov" ] || { echo "coverage.sh: needs llvm-profdata and llvm-cov (apt-get install llvm-14)" >&2; exit 1; }
make --no-print-directory -j"${JOBS:-2}" $(printf 'build/cov/fuzz_%s ' "${names[@]}") >&2
rm -rf build/cov/prof
mkdir -p build/cov/prof
objs=()
for n in "${names[@]}"; do
    [ -d "tests/fuzz/corpus/$n" ] || { echo "coverage.sh: no corpus tests/fuzz/corpus/$n" >&2; exit 1; }
    # -runs=0: run every corpus input once, no mutation; the profile is written at exit
    LLVM_PROFILE_FILE="build/cov/prof/$n-%p.profraw" build/cov/fuzz_"$n" -runs=0 -rss_limit_mb=4096 \
        "tests/fuzz/corpus/$n" >"build/cov/prof/$n.log" 2>&1 || { echo "coverage.sh: fuzz_$n failed, see build/cov/prof/$n.log" >&2; exit 1; }
    if [ ${#objs[@]} -eq 0 ]; then objs=("build/cov/fuzz_$n"); else objs+=(-object "build/cov/fuzz_$n"); fi
done
"$profdata" merge -sparse build/cov/prof/*.profraw -o build/cov/fuzz.profdata
# the files the harnesses are aimed at (what they exercise only on the way, e.g. src/base, is left out)
files=(src/chat/*.c src/tokenizer/*.c src/grammar/*.c src/server/openai.c src/server/anthropic.c
       src/server/responses.c src/server/structured.c src/model/config.c src/model/safetensors.c
       src/model/weights.c src/model/family.c src/kernels/moe.c)
"$cov" report "${objs[@]}" -instr-profile build/cov/fuzz.profdata "${files[@]}" >build/cov/report.txt
# llvm-cov's columns: Filename, Regions, Missed Regions, Cover, Functions, Missed Functions,
# Executed, Lines, Missed Lines, Cover, Branches, Missed Branches, Cover
echo "| file | regions | region cover | lines | line cover | functions executed |"
echo "|---|---|---|---|---|---|"
awk '$1 ~ /\.c$/ || $1 == "TOTAL" { f = $1; sub(/^.*\/src\//, "src/", f); if (f != "TOTAL" && f !~ /^src\//) f = "src/" f;
       printf "| %s | %s | %s | %s | %s | %s |\n", f, $2, $4, $8, $10, $7 }' build/cov/report.txt
