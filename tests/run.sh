#!/usr/bin/env bash
# Run the whole suite: every unit test binary (optimised build, then ASan/UBSan build), then every
# tests/integration/*.sh script. Prints one result line per binary/script and a final
# "N passed, N failed" line; exits non-zero on any failure.
set -u
cd "$(dirname "$0")/.."
passed=0; failed=0; failed_names=()
run_one() { # name, command...
    local name=$1; shift
    local t0=$SECONDS
    if "$@" >"build/logs/$name.log" 2>&1; then
        passed=$((passed + 1)); echo "PASS $name ($((SECONDS - t0))s)"
    else
        failed=$((failed + 1)); failed_names+=("$name"); echo "FAIL $name ($((SECONDS - t0))s)"
        tail -n 40 "build/logs/$name.log" | sed 's/^/    /'
    fi
}
mkdir -p build/logs
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_one repo_size bash scripts/check-size.sh
for t in build/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
for t in build/asan/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "asan-$(basename "$t")" env MTPLX_SANITIZED=1 "$t"
done
for f in build/fuzz/fuzz_*; do
    [ -x "$f" ] || continue
    n=$(basename "$f"); corpus=tests/fuzz/corpus/${n#fuzz_}
    mkdir -p build/fuzz-work/$n
    # replay the committed corpus, then a short random run (regression smoke test, not the real fuzz)
    run_one "$n" "$f" -max_total_time=15 -timeout=10 -rss_limit_mb=2048 build/fuzz-work/$n $( [ -d "$corpus" ] && echo "$corpus" )
done
for s in tests/integration/*.sh; do
    [ -f "$s" ] || continue
    run_one "$(basename "$s" .sh)" bash "$s"
done
echo
[ $failed -eq 0 ] || echo "failed: ${failed_names[*]}"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
