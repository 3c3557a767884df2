#!/usr/bin/env bash
# Fail when the tracked tree grows past the limit: the GPU machine that runs the CUDA work takes a
# working tree of at most 64 MiB, and we keep 8 MiB of room under it (README.md, Testing).
# Counts the files git tracks, at their size in the work tree (the .xz model shards count packed).
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((${MTPLX_SIZE_LIMIT_MIB:-56} * 1024 * 1024))
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "check-size: not a git checkout, nothing to measure" >&2
    exit 0
fi
# one stat for all files (a stat process per file took 30 s of CPU for 2,200 files on a loaded
# machine); regular files only, as `[ -f ]` picked them before: a tracked file deleted in the work
# tree is not counted (its stat error is dropped)
read -r total count < <(git ls-files -z | xargs -0 -r stat -c '%F %s' -- 2>/dev/null |
    awk '/^regular/ { t += $NF; n++ } END { printf "%.0f %d\n", t, n }')
mib=$(awk -v b="$total" 'BEGIN { printf "%.2f", b / 1048576 }')
if [ "$total" -gt "$limit" ]; then
    echo "check-size: $count tracked files hold $mib MiB, over the limit of $((limit / 1048576)) MiB" >&2
    echo "largest:" >&2
    git ls-files -z | xargs -0 stat -c '%s %n' | sort -n | tail -10 >&2
    exit 1
fi
echo "check-size: $count tracked files hold $mib MiB (limit $((limit / 1048576)) MiB)"
