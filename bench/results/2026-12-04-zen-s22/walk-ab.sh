#!/usr/bin/env bash
# session 22 (lead): the decode attention's 4-key walk (5219b46) against main a107aa7, alternated per
# round on the 2-vCPU AMD EPYC Zen 5 VM, kernel path avx512 (and avx2 where named), 2 threads.
# OLD=/tmp/old/build/mtplx (a worktree of a107aa7), NEW=build/mtplx; bench --verify-cost, 41 reps.
set -uo pipefail
OLD=${OLD:-/tmp/old/build/mtplx}; NEW=${NEW:-build/mtplx}; S=../shared/models/qwen35-small-code
run() { # label binary env... -- bench args
  local b=$1; shift; local e=(); while [ "$1" != -- ]; do e+=("$1"); shift; done; shift
  env "${e[@]}" $b bench --verify-cost --reps 41 "$@" 2>&1 | grep forward | awk '{printf "%s ", $3}'
}
for r in 1 2 3; do
  for cfg in "small 8192 4:$S" "small 16384 2:$S" "small 256 2:$S" "embedded 8000 4:models/qwen35-tiny-code" "bench-2b-q4 8192 2:/tmp/bench-2b-q4"; do
    IFS=: read label m <<< "$cfg"; read name ctx rows <<< "$label"
    for b in OLD NEW; do echo "r$r $name ctx $ctx $b avx512: $(run ${!b} X=1 -- --rows $rows --context $ctx --model $m)"; done
  done
  for b in OLD NEW; do echo "r$r small ctx 16384 $b avx2: $(run ${!b} MTPLX_KERNEL=avx2 -- --rows 2 --context 16384 --model $S)"; done
done
