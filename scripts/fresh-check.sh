#!/usr/bin/env bash
# fresh-check.sh — the README's two commands, `make run` then `make test`, on a fresh Debian 12:
# a debootstrap'd bookworm chroot (minbase + build-essential + git) that gets only this machine's
# package-registry settings (apt sources and Acquire settings, npm config) and its local CA
# certificates, then a `git clone` of the committed HEAD. Everything else must come from
# scripts/deps.sh and scripts/npm-deps.sh (issue 19). Prints each step's time and result and stops
# at the first failure, with the tail of its log. Needs root (debootstrap, chroot, mounts).
#
#   scripts/fresh-check.sh [--rebuild-base] [--keep] [--repo DIR]
#     --rebuild-base  debootstrap again instead of unpacking the cached base
#     --keep          leave the chroot in place afterwards (for a look inside)
#     --repo DIR      the git checkout whose HEAD is cloned (default: this script's checkout)
# Environment: MTPLX_FRESH_CACHE (default /var/cache/mtplx-fresh: the base tarball),
# MTPLX_FRESH_WORK (default /var/tmp/mtplx-fresh: the chroot and the logs),
# MTPLX_FRESH_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail
{ # the whole script is one block, parsed before it runs: editing the file meanwhile is harmless
repo=$(cd "$(dirname "$0")/.." && pwd)
rebuild=0; keep=0
while [ $# -gt 0 ]; do
    case $1 in
        --rebuild-base) rebuild=1 ;;
        --keep) keep=1 ;;
        --repo) repo=$(cd "$2" && pwd); shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "fresh-check: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ "$(id -u)" = 0 ] || { echo "fresh-check: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
cache=${MTPLX_FRESH_CACHE:-/var/cache/mtplx-fresh}
work=${MTPLX_FRESH_WORK:-/var/tmp/mtplx-fresh}
mirror=${MTPLX_FRESH_MIRROR:-http://deb.debian.org/debian}
base=$cache/bookworm-minbase-build-essential-git.tar
root=$work/root
logs=$work/logs
commit=$(git -C "$repo" rev-parse HEAD)
case "$root/" in "$repo"/*) echo "fresh-check: the chroot must not live inside the checkout" >&2; exit 2 ;; esac

t_all=$SECONDS
summary=()
step() { # NAME COMMAND...: run, log to $logs/NAME.log, record the time; stop at the first failure
    local name=$1 t0=$SECONDS rc=0; shift
    echo "== $name" >&2
    # in the background, so that `set -e` holds inside a step that is a shell function
    "$@" >"$logs/$name.log" 2>&1 &
    wait $! || rc=$?
    local line
    line=$(printf '%-14s %5ds  %s' "$name" $((SECONDS - t0)) "$([ $rc = 0 ] && echo ok || echo "FAILED (exit $rc)")")
    summary+=("$line"); echo "$line" >&2
    if [ $rc != 0 ]; then
        echo "--- last lines of $logs/$name.log:" >&2
        tail -n 60 "$logs/$name.log" >&2
        report 1
    fi
}
report() { # STATUS
    echo
    echo "fresh-check of $commit ($(git -C "$repo" log -1 --format=%s "$commit"))"
    printf '  %s\n' "${summary[@]}"
    echo "  total          $((SECONDS - t_all))s  $([ "$1" = 0 ] && echo GREEN || echo RED)"
    echo "  logs: $logs"
    exit "$1"
}

# Mounts live in a private mount namespace (this script re-executes itself inside `unshare -m`), so
# they vanish with it even if it is killed; the trap unmounts them too and removes the chroot.
if [ -z "${MTPLX_FRESH_NS:-}" ]; then
    export MTPLX_FRESH_NS=1
    again=(--repo "$repo")
    [ $rebuild = 0 ] || again+=(--rebuild-base)
    [ $keep = 0 ] || again+=(--keep)
    exec unshare --mount --propagation private -- bash "$0" "${again[@]}"
fi
cleanup() {
    local m
    for m in dev/shm dev/pts dev sys proc; do
        mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"
    done
    [ $keep = 1 ] || [ ! -d "$root" ] || rm -rf --one-file-system "$root"
}
trap cleanup EXIT

mkdir -p "$cache" "$logs"
exec 9>"$work/lock"
flock -n 9 || { echo "fresh-check: another run holds $work/lock" >&2; trap - EXIT; exit 2; }
rm -f "$logs"/*.log

make_base() { # debootstrap the base system and pack it into $base
    command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap
    local b=$work/base
    rm -rf --one-file-system "$b"
    debootstrap --variant=minbase --include=build-essential,git bookworm "$b" "$mirror"
    rm -rf "$b"/var/cache/apt/archives/*.deb "$b"/var/lib/apt/lists/*
    tar -C "$b" --numeric-owner -cf "$base.tmp" . && mv "$base.tmp" "$base"
    rm -rf --one-file-system "$b"
}
if [ $rebuild = 1 ] || [ ! -s "$base" ]; then step debootstrap make_base; fi

unpack() {
    rm -rf --one-file-system "$root"
    mkdir -p "$root"
    tar -C "$root" --numeric-owner -xf "$base"
}
step unpack unpack

# Only what a fresh machine of this kind has besides Debian itself: how apt and npm reach their
# registries, and the local CA certificates (the ca-certificates package, if deps.sh installs it,
# builds /etc/ssl/certs from them; nothing is copied into /etc/ssl here).
settings() {
    local f
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    rm -f "$root/etc/apt/sources.list"    # debootstrap's; this machine's sources replace it
    [ ! -f /etc/apt/sources.list ] || cp /etc/apt/sources.list "$root/etc/apt/"
    for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ ! -f "$f" ] || cp "$f" "$root/etc/apt/sources.list.d/"
    done
    # Acquire:: settings (proxies, validity checks, index targets) that this machine's image wrote;
    # a file a package owns comes with that package, if deps.sh installs it
    for f in /etc/apt/apt.conf /etc/apt/apt.conf.d/*; do
        [ -f "$f" ] && grep -qiE '^[^/#]*(Acquire|proxy)' "$f" || continue
        dpkg -S "$f" >/dev/null 2>&1 && continue
        cp "$f" "$root$f" && echo "apt: $f"
    done
    if [ -d /etc/apt/auth.conf.d ]; then cp -a /etc/apt/auth.conf.d/. "$root/etc/apt/auth.conf.d/"; fi
    for f in /etc/npmrc /usr/etc/npmrc "$HOME/.npmrc"; do
        [ -f "$f" ] || continue
        mkdir -p "$root$(dirname "${f/#$HOME//root}")"
        cp "$f" "$root${f/#$HOME//root}" && echo "npm: $f"
    done
    if [ -d /usr/local/share/ca-certificates ]; then
        mkdir -p "$root/usr/local/share/ca-certificates"
        cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
        ls "$root/usr/local/share/ca-certificates"
    fi
    echo "npm registry here: $(npm config get registry 2>/dev/null || echo '(no npm)')"
}
step settings settings

clone() {
    git clone -q --no-hardlinks "$repo" "$root/root/mtplx"
    git -C "$root/root/mtplx" checkout -q "$commit"
    git -C "$root/root/mtplx" log -1 --oneline
}
step clone clone

mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"

# The environment of a root login, plus how this machine reaches registries (proxies, npm settings,
# extra CA bundle), if set here.
envs=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
      TERM=dumb USER=root LOGNAME=root SHELL=/bin/bash)
while IFS='=' read -r k v; do
    case $k in
        http_proxy|https_proxy|no_proxy|HTTP_PROXY|HTTPS_PROXY|NO_PROXY|npm_config_*|NODE_EXTRA_CA_CERTS)
            envs+=("$k=$v") ;;
    esac
done < <(env)
inside() { chroot "$root" /usr/bin/env -i "${envs[@]}" /bin/bash -c "cd /root/mtplx && $1"; }
step make-run inside 'make run'
step make-test inside 'make test'
report 0
}
