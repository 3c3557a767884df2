#!/usr/bin/env bash
# Install what `make run` needs, and with MTPLX_TEST_DEPS=1 also what `make test` needs, on a fresh
# Debian 12 that has none of it. Each need is checked by what the build really uses: each library
# pkg-config must find (a flavour already installed, e.g. libcurl's -gnutls, counts), a C program
# gcc links and runs under ASan/UBSan, a libFuzzer harness clang links with the Makefile's flags, a
# node new enough for the test scripts. A `clang` on the PATH is
# not enough (issue 19: without Debian's compiler-rt package, libclang-rt-14-dev, it cannot link
# -fsanitize=fuzzer). Packages are installed only for the needs that fail; afterwards every failed
# need is checked again, and the script exits 1 naming any that still fail. Runs as root (CI, a
# fresh machine) or through sudo. scripts/fresh-check.sh runs it in a fresh Debian 12 chroot.
# The ARM64 check of the suite (tests/arm64.sh: the unit tests cross-compiled with Debian's
# gcc-aarch64-linux-gnu and run under qemu-user) needs the cross compiler, qemu and the arm64 builds
# of the libraries (multiarch: dpkg --add-architecture arm64); they come with MTPLX_TEST_DEPS=1 (every
# `make test`, so the suite is the same on every machine) or MTPLX_ARM64_DEPS=1 (`make test-arm64`),
# never for `make run`.
set -euo pipefail
# MTPLX_DEPS_MET=test: `make test` ran this script with MTPLX_TEST_DEPS=1 a moment ago and it passed,
# so the later calls of that run (scripts/npm-deps.sh, `make test-arm64` from tests/run.sh) skip the
# probes (~5 s each: compiles, a headless browser)
[ "${MTPLX_DEPS_MET:-}" = test ] && exit 0
PKGS="jansson libpcre2-8 libutf8proc libmicrohttpd libcurl"   # the Makefile's PKGS
NODE_MAJOR_MIN=18                                        # Debian 12's nodejs; tests/js runs on it

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'int main(void) { return 0; }\n' >"$tmp/main.c"
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$tmp/fuzz.c"

needs=(cc make pkgconfig xz)
for m in $PKGS; do needs+=("pc:$m"); done
if [ "${MTPLX_TEST_DEPS:-0}" = 1 ]; then needs+=(asan fuzz node npm cacerts netns browser tmux); fi
if [ "${MTPLX_TEST_DEPS:-0}" = 1 ] || [ "${MTPLX_ARM64_DEPS:-0}" = 1 ]; then needs+=(armcc armlibs qemu); fi
ARM_PC=PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig

# packages NEED: the Debian 12 packages that provide it
packages() {
    case $1 in
        cc) echo gcc libc6-dev ;;
        make) echo make ;;
        pkgconfig) echo pkg-config ;;
        pc:jansson) echo libjansson-dev ;;
        pc:libpcre2-8) echo libpcre2-dev ;;
        pc:libutf8proc) echo libutf8proc-dev ;;
        pc:libmicrohttpd) echo libmicrohttpd-dev ;;
        pc:libcurl) echo libcurl4-openssl-dev ;;    # or -gnutls-dev (they conflict): either serves
        xz) echo xz-utils ;;
        asan) echo gcc libasan8 libubsan1 libtsan2 ;;
        fuzz) echo clang libclang-rt-14-dev ;;     # the runtime: libclang_rt.{fuzzer,asan,ubsan}*.a
        node) echo nodejs ;;
        npm) echo npm ;;
        cacerts) echo ca-certificates ;;           # npm reaches its registry over HTTPS
        netns) echo iproute2 util-linux ;;         # agents.sh: clients run in a loopback-only namespace
        armcc) echo gcc-aarch64-linux-gnu libc6-dev-arm64-cross ;;
        armlibs) echo pkg-config libjansson-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 \
                      libmicrohttpd-dev:arm64 libcurl4-openssl-dev:arm64 ;;
        qemu) echo qemu-user ;;                    # qemu-aarch64 runs the arm64 unit tests
        browser) echo chromium ;;                  # webui.sh: playwright-core drives it headless
        tmux) echo tmux ;;                         # chat.sh: drives `mtplx chat` on a terminal
    esac
}

pc_file() { # MODULE: 0 when its .pc file is in pkg-config's default search path
    local f
    for f in /usr/lib/*/pkgconfig/"$1".pc /usr/lib/pkgconfig/"$1".pc /usr/share/pkgconfig/"$1".pc; do
        [ -e "$f" ] && return 0
    done
    return 1
}

# probe NEED: exit 0 when the need is met (output goes to $tmp/NEED.log)
probe() {
    case $1 in
        cc) command -v gcc && gcc -o "$tmp/cc" "$tmp/main.c" && "$tmp/cc" ;;
        make) command -v make ;;
        pkgconfig) command -v pkg-config ;;
        pc:*) if command -v pkg-config; then pkg-config --exists --print-errors "${1#pc:}"
              else pc_file "${1#pc:}"; fi ;;   # before pkg-config itself is installed
        xz) command -v xz && echo mtplx | xz | xz -dc | grep -qx mtplx ;;
        asan) gcc -fsanitize=address,undefined -o "$tmp/asan" "$tmp/main.c" && "$tmp/asan" &&
              gcc -fsanitize=thread -o "$tmp/tsan" "$tmp/main.c" && "$tmp/tsan" ;;
        fuzz) command -v clang &&
              clang -O1 -g -fsanitize=address,undefined -fsanitize=fuzzer -o "$tmp/fuzz" "$tmp/fuzz.c" &&
              "$tmp/fuzz" -runs=1 ;;
        node) command -v node &&
              node -e "process.exit(+process.versions.node.split('.')[0] >= $NODE_MAJOR_MIN ? 0 : 1)" ;;
        npm) command -v npm && npm --version ;;
        cacerts) [ -s /etc/ssl/certs/ca-certificates.crt ] ;;
        netns) command -v ip && command -v unshare ;;
        armcc) command -v aarch64-linux-gnu-gcc && aarch64-linux-gnu-gcc -o "$tmp/armcc" "$tmp/main.c" ;;
        armlibs) command -v aarch64-linux-gnu-gcc && command -v pkg-config &&
                 env $ARM_PC pkg-config --exists --print-errors $PKGS &&
                 aarch64-linux-gnu-gcc -o "$tmp/armlibs" "$tmp/main.c" $(env $ARM_PC pkg-config --cflags --libs $PKGS) ;;
        qemu) command -v qemu-aarch64 && aarch64-linux-gnu-gcc -o "$tmp/armq" "$tmp/main.c" &&
              qemu-aarch64 -cpu max "$tmp/armq" ;;
        browser) command -v chromium && chromium --headless --no-sandbox --disable-gpu --dump-dom 'data:text/html,<p>mtplx</p>' | grep -q mtplx ;;
        tmux) command -v tmux && tmux -V ;;
    esac
}

failing() { # the needs among "$@" whose probe fails
    local n
    for n in "$@"; do probe "$n" >"$tmp/$n.log" 2>&1 || echo "$n"; done
}

mapfile -t missing < <(failing "${needs[@]}")
[ ${#missing[@]} -eq 0 ] && exit 0
pkgs=()
for n in "${missing[@]}"; do read -ra p <<<"$(packages "$n")"; pkgs+=("${p[@]}"); done
echo "deps: not met: ${missing[*]}; installing ${pkgs[*]}" >&2
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
case " ${pkgs[*]}" in   # the arm64 libraries are multiarch packages: the architecture first
    *:arm64*) dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64 ;;
esac
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >"$tmp/apt.log" 2>&1 || {
    cat "$tmp/apt.log" >&2; exit 1; }

mapfile -t still < <(failing "${missing[@]}")
[ ${#still[@]} -eq 0 ] && exit 0
for n in "${still[@]}"; do
    echo "deps: '$n' is still not met after installing $(packages "$n"):" >&2
    sed 's/^/    /' "$tmp/$n.log" | tail -n 15 >&2
    if [ "$n" = fuzz ] && command -v clang >/dev/null; then
        echo "    clang: $(command -v clang), $(clang --version | head -n 1)" >&2
        echo "    its runtime folder: $(clang -print-resource-dir)/lib/linux" \
             "(install the compiler-rt package of this clang's version)" >&2
    fi
done
exit 1
