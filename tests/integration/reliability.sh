#!/usr/bin/env bash
# reliability.sh — issue 18 in the suite, each part bounded: `mtplx serve` under signals and hostile
# clients (serve_reliability.py), a sampled allocation/I-O failure-injection sweep on the fault build
# (tests/fault/sweep.py; the full sweep is recorded in bench/faults.md), and a short mixed-load soak
# on the ASan/UBSan build (tests/soak/soak.py; the long one is in bench/soak.md).
set -u
cd "$(dirname "$0")/../.."
fail=0
python3 tests/integration/serve_reliability.py signals hostile || fail=1
if [ -x build/fault/mtplx ]; then
    # 4 sampled points per scenario (a random seed each run, printed), servers every 25th point
    python3 tests/fault/sweep.py --sample 4 --stride 25 --timeout 120 \
        --only load-llama,load-deepseek_v3_mtp,tokenizer,template,run-mtp,server-chat-stream,server-messages,server-responses-stream || fail=1
else
    echo "build/fault/mtplx is missing (make fault); the failure-injection sweep did not run"; fail=1
fi
python3 tests/soak/soak.py --bin build/asan/mtplx --duration 15 --clients 3 --prompts 1 --sample 3 || fail=1
[ $fail -eq 0 ] && echo "reliability: all passed"
exit $fail
