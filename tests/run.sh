#!/usr/bin/env bash
# Run the whole suite: every unit test binary (optimised build, then ASan/UBSan build), a replay of
# each fuzz harness's committed corpus, the ARM64 check (tests/arm64.sh under qemu), then every
# tests/integration/*.sh script. Prints one result
# line per binary/script and a closing "N passed, N failed, N skipped" line; exits non-zero on any
# failure.
#
# Skips (tests/unit/test.h): a unit that exits 77 skipped entirely (SKIP, not PASS); a unit that
# passes prints "SKIP <test>: <why>" for each test it could not run here (e.g. AMX kernels on a CPU
# without AMX). The closing line's "N skipped" counts both — whole units and single tests inside
# passing units — and the line before it lists each one, so a run says what it did not test.
set -u
cd "$(dirname "$0")/.."
# the CPU backend's repacked-weight cache (docs/architecture.md "Pack cache") goes to a directory of
# this run, not the user's ~/.cache: the first load of a model fills it, later loads map it
if [ -z "${MTPLX_PACK_CACHE+x}" ]; then
    MTPLX_PACK_CACHE=$(mktemp -d /tmp/mtplx-suite-qpack.XXXXXX)
    export MTPLX_PACK_CACHE
    trap 'rm -rf "$MTPLX_PACK_CACHE"' EXIT
fi
passed=0; failed=0; skipped=0; failed_names=(); skipped_names=()
run_one() { # name, command...
    local name=$1; shift
    local t0=${RUN_ONE_T0:-$SECONDS} rc=0 # RUN_ONE_T0: a start time for a check that ran in the background
    "$@" >"build/logs/$name.log" 2>&1 || rc=$?
    # "SKIP <test>: <why>" lines of the unit's own tests (test.h)
    local skips
    skips=$(grep -a '^SKIP [A-Za-z0-9_]*: ' "build/logs/$name.log" | sed "s/^SKIP /$name:/")
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1))
        if [ -n "$skips" ]; then
            local n; n=$(printf '%s\n' "$skips" | wc -l)
            skipped=$((skipped + n))
            while IFS= read -r l; do skipped_names+=("$l"); done <<<"$skips"
            echo "PASS $name ($((SECONDS - t0))s; $n skipped)"
        else
            echo "PASS $name ($((SECONDS - t0))s)"
        fi
    elif [ $rc -eq 77 ]; then
        skipped=$((skipped + 1))
        if [ -n "$skips" ]; then
            while IFS= read -r l; do skipped_names+=("$l"); done <<<"$skips"
        else
            skipped_names+=("$name: skipped (exit 77)")
        fi
        echo "SKIP $name ($((SECONDS - t0))s)"
    else
        failed=$((failed + 1)); failed_names+=("$name"); echo "FAIL $name ($((SECONDS - t0))s)"
        tail -n 40 "build/logs/$name.log" | sed 's/^/    /'
    fi
}
mkdir -p build/logs
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_one repo_size bash scripts/check-size.sh
# The ARM64 check (the unit tests cross-built for AArch64 under qemu-user, on three emulated CPUs;
# tests/arm64.sh says which units and why) is one qemu process at a time, ~2.5 minutes: it runs
# beside the native units and is reported once they are done, before the integration scripts
# (which time their servers) start. `make test` has built build/arm64 already.
arm64_t0=$SECONDS
make --no-print-directory -s test-arm64 >build/logs/arm64.bg 2>&1 &
arm64_pid=$!
for t in build/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
for t in build/asan/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "asan-$(basename "$t")" env MTPLX_SANITIZED=1 "$t"
done
# Replay a harness's committed corpus: each file runs once as an input (libFuzzer's individual-file
# mode: no mutation, no randomness, the same verdict on every run). The random campaigns that grow
# the corpus are bench/fuzz.sh, outside the suite. The per-input timeout guards against hangs only:
# fuzz_tokenizer's first input loads six tokenizers under ASan (4 s of CPU, 13 s on a loaded machine).
fuzz_replay() { # harness, corpus dir
    local files
    mapfile -t files < <(find "$2" -type f 2>/dev/null | LC_ALL=C sort)
    if [ ${#files[@]} -eq 0 ]; then echo "SKIP corpus: no committed inputs in $2"; return 77; fi
    # libFuzzer's crash exit status is 77 by default, which run_one reads as "skipped": make it 1
    "$1" -timeout=60 -rss_limit_mb=2048 -error_exitcode=1 "${files[@]}"
}
for f in build/fuzz/fuzz_*; do
    [ -x "$f" ] && [ -f "tests/fuzz/$(basename "$f").c" ] || continue
    n=$(basename "$f")
    run_one "$n" fuzz_replay "$f" "tests/fuzz/corpus/${n#fuzz_}"
done
arm64_rc=0
wait "$arm64_pid" || arm64_rc=$?
# report it as run_one would have (its log, its skips), timed from its start
arm64_report() { cat build/logs/arm64.bg; return "$arm64_rc"; }
RUN_ONE_T0=$arm64_t0 run_one arm64 arm64_report
for s in tests/integration/*.sh; do
    [ -f "$s" ] || continue
    run_one "$(basename "$s" .sh)" bash "$s"
done
echo
for l in ${skipped_names[@]+"${skipped_names[@]}"}; do echo "skipped: $l"; done
[ $failed -eq 0 ] || echo "failed: ${failed_names[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
