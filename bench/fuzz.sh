#!/usr/bin/env bash
# fuzz.sh — random libFuzzer campaigns on the harnesses in tests/fuzz/, outside the test suite (the
# suite only replays the committed corpora: tests/run.sh). Run on demand, e.g. before a release or
# after changing a parser:
#
#   bash bench/fuzz.sh [SECONDS] [NAME...]     # default 300 s per harness, every harness
#   bash bench/fuzz.sh 60 jinja toolcall       # one minute each for fuzz_jinja and fuzz_toolcall
#
# Each harness starts from its committed corpus (tests/fuzz/corpus/NAME/, read only) and writes what
# it finds to a work directory, $MTPLX_FUZZ_WORK (default build/fuzz-work)/NAME/: new inputs under
# corpus/, crashing inputs as crash-* / timeout-* / oom-*, the log as fuzz.log. To keep a new input
# as a regression test, copy it into tests/fuzz/corpus/NAME/ (after fixing the bug it found).
# Prints one line per harness and exits non-zero when any harness found a crash.
set -u
cd "$(dirname "$0")/.."
secs=${1:-300}
shift $(( $# > 0 ? 1 : 0 ))
case $secs in '' | *[!0-9]*) echo "usage: bench/fuzz.sh [SECONDS] [NAME...]" >&2; exit 2;; esac
work=${MTPLX_FUZZ_WORK:-build/fuzz-work}
if [ $# -gt 0 ]; then names=("$@"); else
    names=(); for s in tests/fuzz/fuzz_*.c; do n=$(basename "$s" .c); names+=("${n#fuzz_}"); done
fi
make --no-print-directory -j"$(nproc)" $(printf 'build/fuzz/fuzz_%s ' "${names[@]}") || exit 1
bad=0
for n in "${names[@]}"; do
    d=$work/$n
    mkdir -p "$d/corpus"
    before=$(find "$d/corpus" -type f | wc -l)
    rc=0
    build/fuzz/fuzz_"$n" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$d/" \
        "$d/corpus" "tests/fuzz/corpus/$n" >"$d/fuzz.log" 2>&1 || rc=$?
    new=$(( $(find "$d/corpus" -type f | wc -l) - before ))
    if [ $rc -eq 0 ]; then
        echo "ok    fuzz_$n: ${secs}s, $new new inputs in $d/corpus"
    else
        bad=1
        echo "CRASH fuzz_$n (exit $rc): $(ls "$d" | grep -E '^(crash|timeout|oom|leak)-' | tr '\n' ' ')see $d/fuzz.log"
    fi
done
exit $bad
