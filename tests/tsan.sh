#!/usr/bin/env bash
# `make tsan-check`: the threaded parts under ThreadSanitizer, outside `make test` because they take
# minutes there (test_sched ~2 min, test_prefix_cache ~3 min on 2 cores): the pool, thread pool,
# scheduler and prefix-cache unit tests, then `mtplx serve` on the embedded model under mixed
# streaming load (4 and 8 streams, a long prompt beside them read twice so the second is restored
# from the prefix cache, streams dropped mid-answer), its disk tier on (requests that end beside
# others mark their checkpoints, the last to leave writes them, the shutdown writes the rest). Any
# report fails it.
set -uo pipefail
cd "$(dirname "$0")/.."
export TSAN_OPTIONS="halt_on_error=0 exitcode=66"
norand() { setarch "$(uname -m)" -R "$@"; } # address randomization off: tests/run.sh says why
fail=0
for t in test_threadpool test_batch test_sched test_prefix_cache; do
    start=$(date +%s)
    if norand build/tsan/tests/$t > "build/tsan/$t.log" 2>&1; then echo "PASS tsan-$t ($(( $(date +%s) - start )) s)"
    else echo "FAIL tsan-$t (see build/tsan/$t.log)"; grep -m1 -A6 "WARNING: ThreadSanitizer" "build/tsan/$t.log"; fail=1; fi
done
log=build/tsan/serve.log
rm -rf build/tsan/cache-dir
setarch "$(uname -m)" -R build/tsan/mtplx serve --model models/qwen35-tiny-code --port 0 --quiet --max-seqs 16 \
    --cache-dir build/tsan/cache-dir > build/tsan/serve.out 2> "$log" & pid=$!
port=
for _ in $(seq 1 600); do
    port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' build/tsan/serve.out); [ -n "$port" ] && break; sleep 0.1
done
if [ -z "$port" ]; then echo "FAIL tsan-serve: the server did not start"; cat "$log"; kill $pid; exit 1; fi
U=http://127.0.0.1:$port
python3 bench/streams.py $U --streams 4,8 --max-tokens 48 --rounds 1 > /dev/null || fail=1
python3 bench/streams.py $U --streams 2 --max-tokens 24 --long-prompt 2000 --long-delay 0.2 --rounds 2 > /dev/null || fail=1
python3 - "$U" <<'PY' || fail=1
# streams dropped after their first bytes, while others run
import http.client, json, sys, threading, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
def one(drop):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    c.request("POST", "/v1/completions", json.dumps({"model": "m", "prompt": "def fib(n):", "max_tokens": 64, "stream": True}),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read(64) if drop else r.read()
    c.close()
ts = [threading.Thread(target=one, args=(i % 2 == 0,)) for i in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
PY
marked=$(curl -s $U/metrics | sed -n 's/^mtplx_prefix_cache_disk_marked //p')
kill -INT $pid; wait $pid
files=$(ls build/tsan/cache-dir/*.mpc 2>/dev/null | wc -l)
if [ "$files" -eq 0 ]; then echo "FAIL tsan-serve: no checkpoint files in --cache-dir (marked before exit: $marked)"; fail=1; fi
n=$(grep -c "WARNING: ThreadSanitizer" "$log")
if [ "$n" -eq 0 ] && [ $fail -eq 0 ]; then echo "PASS tsan-serve"
else echo "FAIL tsan-serve: $n reports (see $log)"; grep -m1 -A8 "WARNING: ThreadSanitizer" "$log"; fail=1; fi
exit $fail
