#!/usr/bin/env bash
# serve_draft.sh — `serve --draft-quant` (default q4, as run / chat / bench / tune): the listening line
# names the draft's weights, a bad spec is a usage error, greedy MTP equals AR with the quantized draft,
# and a seeded request at a pinned depth draws exactly what `run` with the same --draft-quant draws (the
# draft's q is part of the sample path; before session 27 serve drafted at full precision and run with
# the q4 copy, so the same seed gave other tokens). Embedded model.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
it_init
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }

build/mtplx serve --port 0 --draft-quant q5 >"$tmp/bad.out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "draft-quant must be q4, q8" "$tmp/bad.out" || bad "--draft-quant q5: exit $rc, $(cat "$tmp/bad.out")"

prompts=("def f(x):" "import numpy as np")
for dq in default none q8-head; do
    args=(); [ $dq = default ] || args=(--draft-quant $dq)
    want=$([ $dq = default ] && echo q4 || echo $dq)
    serve_start build/mtplx $dq --cache-ram 0 "${args[@]}" || { bad "serve $dq did not start"; continue; }
    grep -q "draft-quant $want," "$tmp/$dq.out" || bad "$dq: listening line $(cat "$tmp/$dq.out")"
    for k in 0 1; do
        p=${prompts[$k]}
        for d in 1 3; do
            run=$(build/mtplx run "${args[@]}" --prompt "$p" --max-tokens 32 --temperature 1 --top-k 0 --top-p 1 \
                --seed $((7 + k)) --depth $d --json | node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>console.log(JSON.stringify(JSON.parse(s).text)))')
            srv=$(curl -s "127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' -d "$(node -e '
                console.log(JSON.stringify({model: "m", prompt: process.argv[1], max_tokens: 32, temperature: 1,
                  top_k: 0, top_p: 1, seed: +process.argv[2], mtplx: {depth: +process.argv[3]}}))' "$p" $((7 + k)) $d)" |
                node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>console.log(JSON.stringify(JSON.parse(s).choices[0].text)))')
            [ -n "$run" ] && [ "$run" = "$srv" ] || bad "$dq, prompt $k, depth $d: serve $srv != run $run"
        done
        g0=$(curl -s "127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
            -d "{\"model\":\"m\",\"prompt\":$(node -e 'console.log(JSON.stringify(process.argv[1]))' "$p"),\"max_tokens\":40,\"temperature\":0,\"mtplx\":{\"depth\":0}}" | sed 's/"mtplx".*//')
        g3=$(curl -s "127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
            -d "{\"model\":\"m\",\"prompt\":$(node -e 'console.log(JSON.stringify(process.argv[1]))' "$p"),\"max_tokens\":40,\"temperature\":0,\"mtplx\":{\"depth\":3}}" | sed 's/"mtplx".*//')
        t0=$(echo "$g0" | grep -o '"text":"[^"]*"'); t3=$(echo "$g3" | grep -o '"text":"[^"]*"')
        [ -n "$t0" ] && [ "$t0" = "$t3" ] || bad "$dq, prompt $k: greedy depth 3 $t3 != depth 0 $t0"
    done
    serve_stop "$pid" $dq || bad "$dq: stop"
done
[ $fail = 0 ] && echo "serve_draft.sh: all checks passed (q4, none, q8-head: serve = run at depths 1 and 3, greedy MTP = AR)"
exit $fail
