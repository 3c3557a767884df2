#!/usr/bin/env bash
# Run the whole suite: every unit test binary (optimised build, then ASan/UBSan build), a replay of
# each fuzz harness's committed corpus, every tests/integration/*.sh script and the ARM64 check
# (tests/arm64.sh under qemu). Prints one result line per binary/script (its wall time and the CPU
# time it used) and a closing "N passed, N failed, N skipped" line; exits non-zero on any failure.
# All of them share one queue, MTPLX_TEST_JOBS at a time (default the CPU count): the integration
# scripts one by one, in order, the other checks beside them, the longest first (see "The queue");
# the lines come in a fixed order all the same, the ARM64 check's last.
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

# ---- The queue. Every check after the first three goes into one queue that runs JOBS checks at once
# (MTPLX_TEST_JOBS, default the CPU count) on two rules:
#   - the integration scripts run one at a time, in order (each starts servers and clients that use
#     more than one core at moments, and some wait on wall-clock limits: idle timeouts, soak and load
#     durations); beside the one running, the other slots take the unit tests, their sanitizer and
#     AVX2 runs, the fuzz replays and the ARM64 check (none of which times anything);
#   - of those, the longest (LONG below, measured CPU seconds of the last clean-clone run) start
#     first, so that no long check is left to run alone at the end while a core idles.
# Results are printed in queue order (units, AVX2, ASan, fuzz, integration, ARM64 last), each once it
# and every check before it are done, so the output has the same order on every run.
JOBS=${MTPLX_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$JOBS" -ge 1 ] 2>/dev/null || JOBS=1
q_name=(); q_cmd=(); q_serial=()
queue() { # serial (0|1), name, command...: add a check to the queue
    local serial=$1 name=$2; shift 2
    q_serial+=("$serial"); q_name+=("$name"); q_cmd+=("$(printf '%q ' "$@")")
    rm -f "build/logs/$name.res" # a result of an earlier run must not count
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_one repo_size bash scripts/check-size.sh
run_one mutation_patches_apply bash tests/mutations/apply_check.sh
run_one cuda_stream_ops bash scripts/check-cuda-stream-ops.sh
for t in build/tests/test_*; do
    [ -x "$t" ] || continue
    queue 0 "$(basename "$t")" "$t"
done
# the AVX2-only path end to end also on CPUs with AVX-512 (MTPLX_KERNEL=avx2, clamped to what the CPU
# runs): quantized goldens through the packed AVX2 kernel, greedy MTP == AR through the engine
for t in test_quant_goldens test_family_mtp; do
    [ -x "build/tests/$t" ] && queue 0 "avx2-$t" env MTPLX_KERNEL=avx2 "build/tests/$t"
done
for t in build/asan/tests/test_*; do
    [ -x "$t" ] || continue
    queue 0 "asan-$(basename "$t")" env MTPLX_SANITIZED=1 "$t"
done
# ThreadSanitizer, the units the Makefile names (TSAN_UNITS; `make tsan-check` builds more, which
# stay out of the suite): a data race fails the check even when it corrupted nothing this run. With
# address randomization off (setarch -R): GCC 12's TSan aborts on "unexpected memory mapping" under
# kernels that randomize with more than 28 bits (vm.mmap_rnd_bits = 32 on some newer kernels).
for n in ${TSAN_UNITS:-}; do
    [ -x "build/tsan/tests/$n" ] && queue 0 "tsan-$n" setarch "$(uname -m)" -R \
        env TSAN_OPTIONS=halt_on_error=1:exitcode=66 "build/tsan/tests/$n"
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
    queue 0 "$n" fuzz_replay "$f" "tests/fuzz/corpus/${n#fuzz_}"
done
for s in tests/integration/*.sh; do
    [ -f "$s" ] && [ "$s" != tests/integration/lib.sh ] || continue # lib.sh: the scripts' shared functions
    queue 1 "$(basename "$s" .sh)" bash "$s"
done
# The ARM64 check (the unit tests cross-built for AArch64 under qemu-user, on three emulated CPUs;
# tests/arm64.sh says which units and why): one qemu process at a time, the longest check of the
# suite (~400 s of CPU), so it starts first. `make test` has built build/arm64 already.
queue 0 arm64 make --no-print-directory -s test-arm64

# start order of the checks that are not integration scripts: LONG first (the checks over ~20 s of
# CPU in the clean-clone run of 2026-12-02, longest first), then the rest in queue order
LONG="arm64 test_generate_dist asan-test_prefix_cache asan-test_sched asan-test_generate_dist test_grammar_dist
      asan-test_generate test_generate"
order=(); serial=()
for n in $LONG; do
    for i in "${!q_name[@]}"; do [ "${q_name[$i]}" = "$n" ] && [ "${q_serial[$i]}" = 0 ] && order+=("$i"); done
done
for i in "${!q_name[@]}"; do
    if [ "${q_serial[$i]}" = 1 ]; then serial+=("$i")
    else case " $(echo $LONG) " in *" ${q_name[$i]} "*) ;; *) order+=("$i") ;; esac
    fi
done

started=() # queue indices, in start order
q_start() { # index: run that check in the background
    started+=("$1")
    eval "run_check $(printf '%q' "${q_name[$1]}") ${q_cmd[$1]}" &
}
q_running=0; q_serial_busy=0
q_count() { # sets q_running (started, no result yet) and q_serial_busy (an integration script among them)
    local i
    q_running=0; q_serial_busy=0
    for i in ${started[@]+"${started[@]}"}; do
        [ -f "build/logs/${q_name[$i]}.res" ] && continue
        q_running=$((q_running + 1))
        [ "${q_serial[$i]}" = 1 ] && q_serial_busy=1
    done
}
q_reported=0
q_flush() { # report the finished checks at the head of the queue, in queue order
    while [ $q_reported -lt ${#q_name[@]} ] && [ -f "build/logs/${q_name[$q_reported]}.res" ]; do
        report "${q_name[$q_reported]}"
        q_reported=$((q_reported + 1))
    done
}
next_order=0; next_serial=0
while :; do
    q_count
    if [ $q_running -lt "$JOBS" ]; then
        if [ $q_serial_busy = 0 ] && [ $next_serial -lt ${#serial[@]} ]; then
            q_start "${serial[$next_serial]}"; next_serial=$((next_serial + 1)); continue
        fi
        if [ $next_order -lt ${#order[@]} ]; then
            q_start "${order[$next_order]}"; next_order=$((next_order + 1)); continue
        fi
    fi
    [ $q_running -eq 0 ] && [ ${#started[@]} -eq ${#q_name[@]} ] && break
    st=0
    wait -n 2>/dev/null || st=$?
    if [ $st -eq 127 ]; then # no child left: a started check that wrote no result died; it fails
        for i in ${started[@]+"${started[@]}"}; do
            [ -f "build/logs/${q_name[$i]}.res" ] || echo "1 0 0" >"build/logs/${q_name[$i]}.res"
        done
    fi
    q_flush
done
q_flush
echo
for l in ${skipped_names[@]+"${skipped_names[@]}"}; do echo "skipped: $l"; done
[ $failed -eq 0 ] || echo "failed: ${failed_names[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
