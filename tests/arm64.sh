#!/usr/bin/env bash
# The ARM64 check (issue 17): the unit tests cross-compiled for AArch64 (`make arm64`:
# build/arm64/tests/, Debian's gcc-aarch64-linux-gnu) run under qemu-user, so every NEON kernel and
# its run-time dispatch (src/kernels/cpu.c: getauxval(AT_HWCAP / AT_HWCAP2)) is tested for
# correctness on every run of the suite. Speed is not measured: qemu translates every instruction, so
# ARM64 timings here mean nothing (README).
#
# What runs, and on which emulated CPU (qemu-aarch64 -cpu):
#   1. every unit test but those in SLOW below on `max` (it has dotprod, i8mm and bf16: best path
#      neon-i8mm) — the goldens (test_forward, test_family_goldens, test_mlx_goldens,
#      test_quant_goldens) among them, those in REDUCED at the sanitizer build's sizes;
#   2. the kernel units (KERNEL_UNITS) again on `cortex-a76` (dotprod, no i8mm: neon-dot) and
#      `cortex-a57` (plain ARMv8.0 NEON: neon), so each dispatch level runs on a CPU whose best path
#      it is, and the units' own loops over cpu_isa_set levels cover the levels below it; each
#      CPU's detected best path is checked against the one it must have;
#   3. the model goldens again with MTPLX_KERNEL=portable (the plain C path end to end).
# Left out (SLOW): the engine's generation and speculative-decoding units (test_family_mtp,
# test_generate, test_generate_dist and test_grammar_dist with their sampling statistics,
# test_fwd_pool, test_spec_exact, the scheduler's test_sched and the prefix cache's test_prefix_cache,
# each over 5 minutes under qemu on a loaded machine, measured 2026-12-01) and
# the tokenizer units (test_chat_tokref, test_tokenizer): they have no architecture-specific code of
# their own, run natively in the same suite, call kernels covered above, and under qemu take 9-13 s
# of CPU each (tokenizers, test_spec_exact; measured 2026-12-01) to minutes (the generation units):
# with them this check would pass 2 minutes on an idle machine.
#
# Prints one line per run and a closing "arm64: N passed, N failed, N skipped" line; exits 1 on any failure, 77 when the
# cross build or qemu is missing (scripts/deps.sh installs them for `make test`).
set -u
cd "$(dirname "$0")/.."

SLOW="test_family_mtp test_generate test_generate_dist test_grammar_dist test_fwd_pool test_spec_exact
      test_sched test_prefix_cache test_chat_tokref test_tokenizer"
# run with the sanitizer build's reduced sizes (MTPLX_SANITIZED=1: fewer decode steps, the 23M-parameter
# quantizations skipped; the grammar units' random patterns and walks an eighth and a third: 50 -> 5 s and
# 13 -> 4 s of qemu time, measured 2026-12-07), which the native run covers in full
REDUCED="test_forward test_quant_goldens test_grammar_pattern test_grammar"
# test_rows' long prefill is a prefill chunk and a partial one: at the CPU's default 512 rows that is 1,200
# forwarded rows and ~100 s under qemu; chunks of 128 (the same code paths: packed matmuls, attention blocks,
# pooled row ops) make it 300 rows (the native run keeps 512)
ROWS_CHUNK="MTPLX_PREFILL_ROWS=128"
KERNEL_UNITS="test_matmul test_quant test_fwd_kernels test_mlx_goldens test_family_kernels"

if ! command -v qemu-aarch64 >/dev/null; then
    echo "SKIP arm64: qemu-aarch64 is not installed (scripts/deps.sh with MTPLX_ARM64_DEPS=1)"
    exit 77
fi
if ! ls build/arm64/tests/test_* >/dev/null 2>&1; then
    echo "SKIP arm64: no cross-built tests in build/arm64/tests (make arm64)"
    exit 77
fi

logs=build/logs/arm64
mkdir -p "$logs"
passed=0; failed=0; skipped=0; failed_names=()

# run NAME CPU BINARY [VAR=value...]: one unit under qemu; its output goes to $logs/NAME.log. Inside
# a passing unit the x86 kernels' tests print SKIP lines (this CPU cannot run them): expected here.
run() {
    local name=$1 cpu=$2 bin=$3 t0=$SECONDS rc=0; shift 3
    env "$@" qemu-aarch64 -cpu "$cpu" "$bin" >"$logs/$name.log" 2>&1 </dev/null || rc=$?
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1)); echo "PASS $name ($((SECONDS - t0))s)"
    elif [ $rc -eq 77 ]; then
        skipped=$((skipped + 1)); echo "SKIP $name ($((SECONDS - t0))s): every test skipped"
    else
        failed=$((failed + 1)); failed_names+=("$name"); echo "FAIL $name ($((SECONDS - t0))s)"
        tail -n 30 "$logs/$name.log" | sed 's/^/    /'
    fi
}

# expect_best CPU PATH: the best path test_matmul reports on that CPU
expect_best() {
    local got
    got=$(sed -n 's/^cpu: best path //p' "$logs/$1.test_matmul.log" | head -n 1)
    if [ "$got" = "$2" ]; then
        passed=$((passed + 1)); echo "PASS $1 dispatch: best path $got"
    else
        failed=$((failed + 1)); failed_names+=("$1-dispatch")
        echo "FAIL $1 dispatch: best path '$got', expected $2"
    fi
}

for t in build/arm64/tests/test_*; do
    n=$(basename "$t")
    [ -x "$t" ] && [ -f "tests/unit/$n.c" ] || continue
    case " $(echo $SLOW) " in *" $n "*) continue ;; esac
    case " $REDUCED " in
        *" $n "*) run "max.$n" max "$t" MTPLX_SANITIZED=1 ;;
        *) run "max.$n" max "$t" $([ "$n" = test_rows ] && echo "$ROWS_CHUNK") ;;
    esac
done
expect_best max neon-i8mm
for cpu in cortex-a76 cortex-a57; do
    for n in $KERNEL_UNITS; do run "$cpu.$n" "$cpu" "build/arm64/tests/$n"; done
done
expect_best cortex-a76 neon-dot
expect_best cortex-a57 neon
run portable.test_family_goldens max build/arm64/tests/test_family_goldens MTPLX_KERNEL=portable
run portable.test_quant_goldens max build/arm64/tests/test_quant_goldens MTPLX_KERNEL=portable MTPLX_SANITIZED=1

echo
[ $failed -eq 0 ] || echo "failed: ${failed_names[*]}"
echo "arm64: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
