#!/usr/bin/env bash
# bench/cuda_same_bits.sh — does a CUDA change keep every bit? Runs two builds (or one build under two knob
# sets) of mtplx on the embedded model and compares, byte for byte, what each writes: the logits of a
# 600-token prefill, of 600 decode steps and of the MTP head (`logits --step --mtp`), and the text sampled
# at D3 (T 0.7) and at D8@0.4 (T 0.6). Used by the GPU sessions' call scripts (bench/cuda.md), which
# build the tree before and after a change or flip its knob.
#
#   bench/cuda_same_bits.sh "build/mtplx-old" "build/mtplx-new"
#   bench/cuda_same_bits.sh "env MTPLX_CUDA_X=0 build/mtplx" "build/mtplx"
#
# Each argument is a command prefix (word-split). Prints one line per comparison and "same bits: yes|no";
# exits 0 only when everything is identical. Scratch files under ${TMPDIR:-/tmp}.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 CMD_A CMD_B" >&2; exit 2; }
export MTPLX_DEVICE=${MTPLX_DEVICE:-cuda}
dir=$(mktemp -d "${TMPDIR:-/tmp}/same-bits.XXXXXX") || exit 2
trap 'rm -rf "$dir"' EXIT
T=$(seq -s, 100 7 4300)
run_side() { # run_side NAME CMD...: every output of one side into $dir/NAME-*
    local name=$1 mode; shift
    for mode in "" "--step" "--step --mtp"; do
        "$@" logits --tokens "$T" $mode --out "$dir/$name-l${mode// /}.st" > /dev/null ||
            { echo "$name: logits [$mode] failed"; return 1; }
    done
    "$@" run --prompt "def fib(n):" --max-tokens 300 --depth 3 --draft-min-conf 0 --temperature 0.7 --seed 9 \
        > "$dir/$name-d3.txt" 2> /dev/null || { echo "$name: D3 run failed"; return 1; }
    "$@" run --prompt "def fib(n):" --max-tokens 300 --depth 8 --draft-min-conf 0.4 --temperature 0.6 --seed 3 \
        > "$dir/$name-d8.txt" 2> /dev/null || { echo "$name: D8@0.4 run failed"; return 1; }
}
# shellcheck disable=SC2086 # the prefixes are meant to be word-split
run_side a $1 && run_side b $2 || { echo "same bits: no (a run failed)"; exit 1; }
ok=1
for f in l l--step l--step--mtp d3.txt d8.txt; do
    what=$(case $f in l) echo "logits, 600-token prefill";; l--step) echo "logits, 600 steps";;
        l--step--mtp) echo "logits, MTP head";; d3.txt) echo "sampled text, D3";; *) echo "sampled text, D8@0.4";; esac)
    ext=; [ "${f%.txt}" = "$f" ] && ext=.st
    if cmp -s "$dir/a-$f$ext" "$dir/b-$f$ext"; then echo "$what: identical"; else echo "$what: DIFFER"; ok=0; fi
done
[ $ok = 1 ] && { echo "same bits: yes"; exit 0; }
echo "same bits: no"; exit 1
