#!/usr/bin/env bash
# run.sh — plant each deliberate bug of tests/mutations/*.patch in a copy of the working tree and
# check that the tests catch it (format: tests/mutations/README.md).
#
#   tests/mutations/run.sh [--control] [--keep] [NAME...]     # default: every *.patch
#
# First `make` builds every patch's targets in the working tree itself, so that each copy rebuilds
# only what its patch touches. Per mutation: copy the working tree (with build/; without .git;
# tests/js/node_modules is symlinked) to a temp dir, `git apply` the patch, run
# `make -j2 <# build: targets>`, then the `# check:` command at the copy's root. CAUGHT when the check
# exits non-zero, SURVIVED when it passes. A patch that no longer applies, a missing header or a build
# that fails is an ERROR, never a pass. --control first runs the build and the check on the unmutated
# copy, which must pass (else ERROR: a check that always fails proves nothing). --keep leaves the
# copies in place. The check's output goes to build/mutations/NAME.log (NAME.control.log).
# Prints one line per mutation and a closing "N caught, N survived"; exits non-zero when any
# mutation survived or was an error.
set -u
cd "$(dirname "$0")/../.."
root=$PWD
control=0 keep=0 names=()
for a in "$@"; do
    case $a in
        --control) control=1 ;;
        --keep) keep=1 ;;
        -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "unknown option $a" >&2; exit 2 ;;
        *) names+=("${a%.patch}") ;;
    esac
done
if [ ${#names[@]} -eq 0 ]; then
    for p in tests/mutations/*.patch; do [ -f "$p" ] && names+=("$(basename "$p" .patch)"); done
fi
logs=$root/build/mutations
mkdir -p "$logs"
jobs=${MUTATION_JOBS:-2}
limit=${MUTATION_TIMEOUT:-1800} # seconds per check; a hang past it counts as caught (exit 124)
caught=0 survived=0 errors=0

# header NAME FIELD: the value of "# FIELD: ..." in the patch's header (before the first diff line)
header() { sed -n "/^diff --git/q; s/^# $2: *//p" "tests/mutations/$1.patch" | head -n 1; }

# copy_tree DEST: the working tree as it is now (tracked, untracked, build outputs), minus .git and
# the npm modules, which are linked instead (263 MB that no patch touches)
copy_tree() {
    tar -C "$root" --exclude=./.git --exclude=./tests/js/node_modules --exclude=./build/mutations \
        --exclude=./build/fuzz-work -cf - . | tar -C "$1" -xf -
    [ -d "$root/tests/js/node_modules" ] && ln -s "$root/tests/js/node_modules" "$1/tests/js/node_modules"
    return 0
}

# build_and_check DIR BUILD CHECK LOG: 0 when the build succeeded, then the check's exit status in $check_rc
build_and_check() {
    local dir=$1 build=$2 check=$3 log=$4
    if [ -n "$build" ]; then
        # shellcheck disable=SC2086 # the targets are a word list
        (cd "$dir" && make --no-print-directory -j"$jobs" $build) >"$log" 2>&1 || return 1
    else
        : >"$log"
    fi
    check_rc=0
    (cd "$dir" && timeout "$limit" bash -c "$check") >>"$log" 2>&1 || check_rc=$?
    return 0
}

# Bring the working tree's own build up to date for every selected patch first: each copy then
# rebuilds only what its patch touches (a stale tree would be rebuilt in full once per mutation).
all_targets=$(for n in "${names[@]}"; do [ -f "tests/mutations/$n.patch" ] && header "$n" build; done | tr ' ' '\n' | sort -u | tr '\n' ' ')
if [ -n "${all_targets// /}" ]; then
    # shellcheck disable=SC2086 # the targets are a word list
    make --no-print-directory -j"$jobs" $all_targets >"$logs/prebuild.log" 2>&1 ||
        { echo "the unmutated tree does not build: build/mutations/prebuild.log"; exit 1; }
fi

for n in "${names[@]}"; do
    p=tests/mutations/$n.patch
    t0=$SECONDS
    if [ ! -f "$p" ]; then
        errors=$((errors + 1)); echo "ERROR    $n: no such file $p"; continue
    fi
    what=$(header "$n" mutation) build=$(header "$n" build) check=$(header "$n" check)
    if [ -z "$what" ] || [ -z "$check" ]; then
        errors=$((errors + 1)); echo "ERROR    $n: the header lacks '# mutation:' or '# check:'"; continue
    fi
    dir=$(mktemp -d "${TMPDIR:-/tmp}/mtplx-mut-$n.XXXXXX")
    copy_tree "$dir"
    verdict=""
    if [ $control = 1 ]; then
        if ! build_and_check "$dir" "$build" "$check" "$logs/$n.control.log"; then
            verdict="ERROR    $n: the unmutated copy does not build (build/mutations/$n.control.log)"
        elif [ $check_rc -ne 0 ]; then
            verdict="ERROR    $n: the check fails without the mutation too (exit $check_rc, build/mutations/$n.control.log)"
        fi
    fi
    if [ -z "$verdict" ]; then
        if ! (cd "$dir" && GIT_CEILING_DIRECTORIES=$(dirname "$dir") git apply --whitespace=nowarn "$root/$p") >"$logs/$n.log" 2>&1; then
            verdict="ERROR    $n: the patch no longer applies: $(head -n 1 "$logs/$n.log")"
        elif ! build_and_check "$dir" "$build" "$check" "$logs/$n.log"; then
            verdict="ERROR    $n: the mutated copy does not build (build/mutations/$n.log)"
        elif [ $check_rc -ne 0 ]; then
            caught=$((caught + 1))
            verdict="CAUGHT   $n: $what (check exit $check_rc, $((SECONDS - t0))s)"
        else
            survived=$((survived + 1))
            verdict="SURVIVED $n: $what (check passed, build/mutations/$n.log)"
        fi
    fi
    case $verdict in ERROR*) errors=$((errors + 1)) ;; esac
    echo "$verdict"
    if [ $keep = 1 ]; then echo "         copy kept in $dir"; else rm -rf "$dir"; fi
done
[ $errors -eq 0 ] || echo "$errors errors (patches that do not apply or build, or failing controls)"
echo "$caught caught, $survived survived"
[ $survived -eq 0 ] && [ $errors -eq 0 ]
