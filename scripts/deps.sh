#!/usr/bin/env bash
# Install the Debian packages the build and tests need, only those missing. Runs as root on a
# fresh Debian 12 (CI, a newcomer's machine); uses sudo when not root.
set -euo pipefail
need=(gcc make pkg-config xz-utils libjansson-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev libcurl4-openssl-dev)
if [ "${MTPLX_TEST_DEPS:-0}" = 1 ]; then need+=(nodejs npm clang iproute2); fi
missing=()
for p in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs/npm may come from outside Debian (e.g. nodesource); accept any working binary.
if [ "${MTPLX_TEST_DEPS:-0}" = 1 ]; then
    filtered=()
    for p in "${missing[@]}"; do
        case "$p" in
            nodejs) command -v node >/dev/null || filtered+=("$p") ;;
            npm) command -v npm >/dev/null || filtered+=("$p") ;;
            clang) command -v clang >/dev/null || filtered+=("$p") ;;
            *) filtered+=("$p") ;;
        esac
    done
    missing=("${filtered[@]+"${filtered[@]}"}")
fi
# libcurl: either Debian flavour (-openssl or -gnutls, which conflict) serves; keep the one installed.
if pkg-config --exists libcurl 2>/dev/null; then
    kept=()
    for p in "${missing[@]+"${missing[@]}"}"; do [ "$p" = libcurl4-openssl-dev ] || kept+=("$p"); done
    missing=("${kept[@]+"${kept[@]}"}")
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}" >&2
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
