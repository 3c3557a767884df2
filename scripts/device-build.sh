#!/usr/bin/env bash
# Build mtplx on the GPU machine (the `device` tool), which cannot reach any package registry: it
# runs Ubuntu 24.04 with the runtime libraries of jansson, PCRE2 and libcurl but no development
# headers, and neither utf8proc nor libmicrohttpd. So:
#
#   scripts/device-build.sh fetch           here (Debian 12, registry reachable): downloads the
#                                           Debian .deb files of the missing headers and libraries
#                                           into build/device-debs (about 4 MB; build/ is ignored)
#   scripts/device-build.sh build [TARGET]  there (carry build/device-debs): unpacks them under
#                                           /tmp/mtplx-devdeps and runs make with those headers;
#                                           default targets: model build/mtplx
#
# Debian 12's libcurl is not used on the device (it needs a libssh2 Ubuntu does not ship): its
# headers are, and the link takes the system's own libcurl.so.4. Measured 2026-12-01: builds, and
# test_forward / test_generate pass there (Intel Xeon, 16 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
DEBS=build/device-debs
case "${1:-}" in
fetch)
    mkdir -p "$DEBS"
    (cd "$DEBS" && apt-get download libjansson-dev libjansson4 libpcre2-dev libpcre2-8-0 libpcre2-16-0 \
        libpcre2-32-0 libpcre2-posix3 libutf8proc-dev libutf8proc2 libmicrohttpd-dev libmicrohttpd12 \
        libcurl4-openssl-dev)
    echo "device-build: $(ls "$DEBS" | wc -l) packages in $DEBS; pass carry=[\"$DEBS\"] to the device run"
    ;;
build)
    shift
    ls "$DEBS"/*.deb >/dev/null 2>&1 || { echo "device-build: no $DEBS/*.deb (run 'fetch' here first and carry it)" >&2; exit 1; }
    P=/tmp/mtplx-devdeps
    rm -rf "$P" && mkdir -p "$P"
    for d in "$DEBS"/*.deb; do dpkg-deb -x "$d" "$P"; done
    L=$P/usr/lib/x86_64-linux-gnu
    rm -f "$L/libcurl.so" "$L"/libcurl.so.4*   # link the system's libcurl (see above)
    [ $# -gt 0 ] || set -- model build/mtplx
    make -j"$(nproc)" "$@" CC="gcc -I$P/usr/include -I$P/usr/include/x86_64-linux-gnu" \
        LDLIBS="-L$L -Wl,-rpath,$L -ljansson -lpcre2-8 -lutf8proc -lmicrohttpd -l:libcurl.so.4 -lpthread -lm"
    ;;
*)
    echo "usage: scripts/device-build.sh fetch | build [make targets]" >&2
    exit 2
    ;;
esac
