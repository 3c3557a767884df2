#!/usr/bin/env bash
# Run the whole suite: every unit test binary (optimised build, then ASan/UBSan build), a replay of
# each fuzz harness's committed corpus, the ARM64 check (tests/arm64.sh under qemu), then every
# tests/integration/*.sh script. Prints one result line per binary/script (its wall time and the CPU
# time it used) and a closing "N passed, N failed, N skipped" line; exits non-zero on any failure.
# The units and fuzz replays run side by side (MTPLX_TEST_JOBS at a time, default the CPU count; the
# lines come in a fixed order all the same), then the integration scripts one by one with the ARM64
# check beside them, reported last.
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
mkdir -p build/logs
# run_check NAME COMMAND...: run one check with its output in build/logs/NAME.log, then write
# "rc wall_s cpu_s" to build/logs/NAME.res (cpu: user + system time of everything it started, from
# bash's `times`: what a check costs, which its wall time hides when checks run side by side or the
# machine is loaded). The .res file appears only once the check is done (written, then renamed).
run_check() {
    local name=$1; shift
    local t0=$SECONDS rc=0 cpu
    rm -f "build/logs/$name.res"
    "$@" >"build/logs/$name.log" 2>&1 </dev/null || rc=$?
    # `times` in this shell (not in a $(...) subshell, whose counters start at zero): line 2 is
    # "XmY.YYYs XmY.YYYs", the user and system time of the children
    times >"build/logs/$name.times"
    cpu=$(awk 'NR == 2 { split($1, u, "m"); split($2, s, "m"); printf "%.1f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' \
        "build/logs/$name.times")
    rm -f "build/logs/$name.times"
    echo "$rc $((SECONDS - t0)) ${cpu:-0}" >"build/logs/$name.res.tmp" && mv "build/logs/$name.res.tmp" "build/logs/$name.res"
}
# report NAME: count and print the result of a finished check ("PASS name (wall, cpu)", its skips)
report() {
    local name=$1 rc wall cpu
    read -r rc wall cpu <"build/logs/$name.res" || { rc=1; wall=0; cpu=0; }
    local when="${wall}s, cpu ${cpu}s"
    # "SKIP <test>: <why>" lines of the unit's own tests (test.h)
    local skips
    skips=$(grep -a '^SKIP [A-Za-z0-9_]*: ' "build/logs/$name.log" | sed "s/^SKIP /$name:/")
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
        if [ -n "$skips" ]; then
            local n; n=$(printf '%s\n' "$skips" | wc -l)
            skipped=$((skipped + n))
            while IFS= read -r l; do skipped_names+=("$l"); done <<<"$skips"
            echo "PASS $name ($when; $n skipped)"
        else
            echo "PASS $name ($when)"
        fi
    elif [ "$rc" -eq 77 ]; then
        skipped=$((skipped + 1))
        if [ -n "$skips" ]; then
            while IFS= read -r l; do skipped_names+=("$l"); done <<<"$skips"
        else
            skipped_names+=("$name: skipped (exit 77)")
        fi
        echo "SKIP $name ($when)"
    else
        failed=$((failed + 1)); failed_names+=("$name"); echo "FAIL $name ($when)"
        tail -n 40 "build/logs/$name.log" | sed 's/^/    /'
    fi
}
run_one() { # name, command...: one check now, in the foreground (in a subshell: its own `times`)
    ( run_check "$@" )
    report "$1"
}

# The unit tests, fuzz replays and the ARM64 check do not time anything, so they run side by side:
# up to MTPLX_TEST_JOBS checks at once (default: the CPUs; the heavy units run one compute thread
# each). Results are printed in start order, each once it and every check before it are done.
JOBS=${MTPLX_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$JOBS" -ge 1 ] 2>/dev/null || JOBS=1
pool=(); pool_reported=0
pool_flush() { # report the finished checks at the head of the queue, in order
    while [ $pool_reported -lt ${#pool[@]} ] && [ -f "build/logs/${pool[$pool_reported]}.res" ]; do
        report "${pool[$pool_reported]}"
        pool_reported=$((pool_reported + 1))
    done
}
pool_running() { # checks started and not yet finished
    local i n=0
    for ((i = pool_reported; i < ${#pool[@]}; i++)); do [ -f "build/logs/${pool[$i]}.res" ] || n=$((n + 1)); done
    echo $n
}
pool_wait() { # wait until fewer than $1 pooled checks run (a check that died without a result fails)
    while [ "$(pool_running)" -ge "$1" ]; do
        local st=0
        wait -n 2>/dev/null || st=$?
        if [ $st -eq 127 ]; then # no child left to wait for
            local i
            for ((i = pool_reported; i < ${#pool[@]}; i++)); do
                [ -f "build/logs/${pool[$i]}.res" ] || echo "1 0 0" >"build/logs/${pool[$i]}.res"
            done
        fi
        pool_flush
    done
}
pool_start() { # name, command...: run it in the background once a slot is free
    pool_wait "$JOBS"
    rm -f "build/logs/$1.res"
    pool+=("$1")
    run_check "$@" &
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_one repo_size bash scripts/check-size.sh
run_one mutation_patches_apply bash tests/mutations/apply_check.sh
for t in build/tests/test_*; do
    [ -x "$t" ] || continue
    pool_start "$(basename "$t")" "$t"
done
# the AVX2-only path end to end also on CPUs with AVX-512 (MTPLX_KERNEL=avx2, clamped to what the CPU
# runs): quantized goldens through the packed AVX2 kernel, greedy MTP == AR through the engine
for t in test_quant_goldens test_family_mtp; do
    [ -x "build/tests/$t" ] && pool_start "avx2-$t" env MTPLX_KERNEL=avx2 "build/tests/$t"
done
for t in build/asan/tests/test_*; do
    [ -x "$t" ] || continue
    pool_start "asan-$(basename "$t")" env MTPLX_SANITIZED=1 "$t"
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
    pool_start "$n" fuzz_replay "$f" "tests/fuzz/corpus/${n#fuzz_}"
done
pool_wait 1
pool_flush
# The ARM64 check (the unit tests cross-built for AArch64 under qemu-user, on three emulated CPUs;
# tests/arm64.sh says which units and why) is one qemu process at a time, ~3-5 minutes of CPU. It
# runs beside the integration scripts, which leave a core free (they use ~1.1 cores one at a time),
# not beside the pool, which keeps both cores busy: the clean-clone CI of 2026-12-02 ran the pool and
# the ARM64 check together at full load for 7 minutes, then the integration scripts for 6 minutes
# with one core mostly idle. It is reported last. `make test` has built build/arm64 already.
rm -f build/logs/arm64.res
run_check arm64 make --no-print-directory -s test-arm64 &
for s in tests/integration/*.sh; do
    [ -f "$s" ] && [ "$s" != tests/integration/lib.sh ] || continue # lib.sh: the scripts' shared functions
    run_one "$(basename "$s" .sh)" bash "$s"
done
# the ARM64 check: wait for it if it still runs (its own .res says it is done) and report it
pool=(arm64); pool_reported=0
pool_wait 1
pool_flush
echo
for l in ${skipped_names[@]+"${skipped_names[@]}"}; do echo "skipped: $l"; done
[ $failed -eq 0 ] || echo "failed: ${failed_names[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
