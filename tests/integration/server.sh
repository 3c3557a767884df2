#!/usr/bin/env bash
# server.sh — end-to-end tests of `mtplx serve` on the embedded model with the official openai and
# @anthropic-ai/sdk clients (tests/js/server_sdk.mjs), then hostile/heavy use (auth, malformed
# requests, limits, disconnect, 50 concurrent streams; tests/js/server_abuse.mjs) against the
# ASan/UBSan build, which must shut down cleanly on SIGTERM with no leak report.
# Loopback only, free ports chosen by the server (--port 0), every wait bounded.
set -u
cd "$(dirname "$0")/../.."
unset MTPLX_API_KEY
[ -x build/mtplx ] && [ -x build/asan/mtplx ] || { echo "build/mtplx and build/asan/mtplx are needed (make test builds them)"; exit 1; }
[ -d tests/js/node_modules/openai ] || bash scripts/npm-deps.sh
. tests/integration/lib.sh
it_init

fail=0
# 1. refusal to bind a non-loopback address without a key (usage error, nothing started)
if build/mtplx serve --host 0.0.0.0 --port 0 >"$tmp/refuse.out" 2>&1; then echo "non-loopback bind without a key was accepted"; fail=1;
elif ! grep -q "API key" "$tmp/refuse.out"; then echo "no reason given for refusing 0.0.0.0:"; cat "$tmp/refuse.out"; fail=1; fi

# 1b. the default depth of requests that set none: untuned, the adaptive depth 6 with min conf 0.4
#     (/health says both); --depth N alone makes it a fixed depth; --draft-min-conf is checked
health_depth() { # health_depth NAME ARGS...: "depth/draft_min_conf" of /health, of a request's mtplx stats, of
                 # requests pinning mtplx.depth 2 (alone and with mtplx.draft_min_conf 0.5) and setting only
                 # mtplx.draft_min_conf 0.25, then the param a draft_min_conf of 1 is refused for, on a
                 # server started with ARGS
    local name=$1; shift
    serve_start build/mtplx "$name" --quiet "$@" || return 1
    node -e 'const u=process.argv[1], d=x=>x.depth+"/"+x.draft_min_conf;
      const req=m=>fetch(u+"/v1/completions",{method:"POST",headers:{"content-type":"application/json"},
        body:JSON.stringify({prompt:"def f(x):",max_tokens:16,temperature:0.6,seed:1,...m})}).then(r=>r.json());
      (async()=>{const h=await (await fetch(u+"/health")).json(), a=await req({}), b=await req({mtplx:{depth:2}});
        const c=await req({mtplx:{depth:2,draft_min_conf:0.5}}), e=await req({mtplx:{draft_min_conf:0.25}});
        const f=await req({mtplx:{draft_min_conf:1}});
        console.log([h,a.mtplx,b.mtplx,c.mtplx,e.mtplx].map(d).join(" ")+" "+(f.error&&f.error.param))})()' "http://127.0.0.1:$port"
    serve_end "$pid"
}
export MTPLX_HOME=$tmp/home # no tuning.json
d=$(health_depth dflt); [ "$d" = "6/0.4 6/0.4 2/0 2/0.5 6/0.25 mtplx.draft_min_conf" ] || { echo "untuned default depth: health, request, pinned: $d"; fail=1; }
d=$(health_depth fixed --depth 3); [ "$d" = "3/0 3/0 2/0 2/0.5 3/0.25 mtplx.draft_min_conf" ] || { echo "--depth 3: health, request, pinned: $d"; fail=1; }
d=$(health_depth both --depth 4 --draft-min-conf 0.5)
[ "$d" = "4/0.5 4/0.5 2/0 2/0.5 4/0.25 mtplx.draft_min_conf" ] || { echo "--depth 4 --draft-min-conf 0.5: health, request, pinned: $d"; fail=1; }
rc=0; build/mtplx serve --port 0 --draft-min-conf 1 >/dev/null 2>"$tmp/mc.err" || rc=$?
[ "$rc" = 2 ] && grep -q "draft-min-conf" "$tmp/mc.err" || { echo "--draft-min-conf 1: exit $rc, $(cat "$tmp/mc.err")"; fail=1; }

# 2. the SDK suite on the optimised build
serve_start build/mtplx plain --quiet || exit 1
timeout 600 node tests/js/server_sdk.mjs "http://127.0.0.1:$port" || fail=1
serve_stop "$pid" plain || fail=1

# 3. abuse + concurrency on the ASan build, with a key, a small context and a 1 MiB body limit
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
serve_start build/asan/mtplx asan --quiet --api-key test-key-123 --max-body 1048576 --ctx 128 --max-queue 64 || exit 1
timeout 600 node tests/js/server_abuse.mjs "http://127.0.0.1:$port" test-key-123 || fail=1
serve_stop "$pid" asan || fail=1
sanitizer_clean "$tmp/asan.err" || fail=1
[ $fail -eq 0 ] && echo "server integration: all passed"
exit $fail
