#!/usr/bin/env bash
# apply_check.sh — every deliberate bug of tests/mutations/*.patch still applies to today's sources
# (`git apply --check`, nothing is changed). The mutation run itself (run.sh: a build and a check per
# patch, ~20 minutes) is not part of `make test`; this is, so that a change that moves a patch's
# context is noticed when it lands, not sessions later (four patches had silently stopped applying).
# Prints the patches that do not apply; exits non-zero when any does not.
set -u
cd "$(dirname "$0")/../.."
bad=0 n=0
for p in tests/mutations/*.patch; do
    [ -f "$p" ] || continue
    n=$((n + 1))
    if ! out=$(git apply --check "$p" 2>&1); then
        echo "does not apply: $p"
        echo "$out" | sed 's/^/    /' | head -4
        bad=$((bad + 1))
    fi
done
echo "mutation patches: $n, $bad do not apply (regenerate: apply by hand, git diff, keep the header)"
[ "$bad" -eq 0 ]
