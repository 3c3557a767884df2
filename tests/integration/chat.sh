#!/usr/bin/env bash
# chat.sh — `mtplx chat` on a real terminal: tmux runs it in a detached session, send-keys types,
# capture-pane reads the screen. Checks: a question gets a streamed answer with the reasoning
# dimmed and a stats line; /set changes a value; Ctrl-C stops an answer mid-stream without
# leaving; /reset empties the conversation (the next prompt is as long as a first one); a line
# ending in \ continues the message; history survives a restart (Up recalls it) and
# --hide-thinking hides the reasoning; piped input gives answers-only stdout.
set -u
cd "$(dirname "$0")/../.."
bin=${MTPLX_CHAT_BIN:-build/mtplx}   # e.g. build/asan/mtplx
[ -x "$bin" ] || { echo "$bin is needed (make test builds build/mtplx)"; exit 1; }
command -v tmux >/dev/null || MTPLX_TEST_DEPS=1 bash scripts/deps.sh
tmp=$(mktemp -d)
sock="mtplx-chat-test-$$"
# -f /dev/null: the user's ~/.tmux.conf (a different shell, key bindings) must not change the test
T() { tmux -f /dev/null -L "$sock" "$@"; }
cleanup() { T kill-server 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    if T has-session -t chat 2>/dev/null; then
        echo "--- screen:"; T capture-pane -p -t chat -S -60 2>/dev/null | grep -v '^$' | tail -40
    else # say what is known instead of a screen that no longer exists
        echo "--- the tmux server or its session is gone ($(tmux -V), SHELL=${SHELL:-unset}); tmux said:"
        tail -n 20 "$tmp/tmux.err" 2>/dev/null
    fi
    exit 1
}

screen() { T capture-pane -p -t chat -S -400 "$@"; }
# wait_for REGEX [SECONDS]: until the screen (scrollback included) matches; a session that has gone
# fails at once rather than at the timeout
wait_for() {
    local i
    for i in $(seq 1 $((${2:-60} * 10))); do
        screen 2>>"$tmp/tmux.err" | grep -qE -- "$1" && return 0
        T has-session -t chat 2>>"$tmp/tmux.err" || fail "waiting for /$1/"
        sleep 0.1
    done
    fail "timed out waiting for /$1/"
}
count() { screen | grep -cE -- "$1"; }
# send TEXT: type a line and press Enter
send() { T send-keys -t chat -l -- "$1"; T send-keys -t chat Enter; }
# One server for the whole script, kept alive without sessions (exit-empty off): with tmux's default a
# server exits when its last session is killed, and a new-session sent at that moment can reach the
# dying server. remain-on-exit keeps a pane whose command ended on the screen.
T start-server \; set -g exit-empty off \; set -g remain-on-exit on 2>>"$tmp/tmux.err" ||
    fail "tmux could not start a server"
start() { # ARGS...: a fresh session running mtplx chat
    local try
    T kill-session -t chat 2>/dev/null
    for try in 1 2 3; do
        T new-session -d -s chat -x 160 -y 50 \
            "$bin chat --history '$tmp/history' --seed 2 $*; echo CHAT-EXITED-\$?; sleep 60" \
            2>>"$tmp/tmux.err" && T has-session -t chat 2>>"$tmp/tmux.err" && break
        echo "tmux new-session failed (try $try): $(tail -n 1 "$tmp/tmux.err" 2>/dev/null)"
        sleep 1
    done
    wait_for '^mtplx chat — ' 60
}

start --max-tokens 80
# 1. a question: the reasoning streams dimmed (SGR 2 on the screen), then the answer and a stats line
send 'Show me the first lines of json/decoder.py'
wait_for '^\[[0-9]+ tok, prefill [0-9]+ tok .*tok/verify' 60
screen -e | grep -q $'\e\\[2mThe user wants' || fail "the reasoning is not dimmed"
first_prefill=$(screen | sed -n 's/^\[[0-9]* tok, prefill \([0-9]*\) tok.*/\1/p' | head -n 1)
[ -n "$first_prefill" ] || fail "no prefill count in the stats line"

# 2. /set
send '/set temperature 0.7'
wait_for '^temperature = 0\.7$'
send '/set'
wait_for '^temperature 0\.7, top_p'
send '/set temperature hot'
wait_for "temperature needs a number"
# /depth N is a fixed depth (as --depth N); /set draft_min_conf X makes it adaptive again
send '/depth 3'
wait_for '^depth = 3, draft_min_conf = 0$'
send '/set draft_min_conf 0.5'
wait_for '^draft_min_conf = 0\.5$'
send '/depth'
wait_for '^depth 3, draft_min_conf 0\.5$'

# 3. Ctrl-C mid-answer: the answer stops, the REPL stays
send '/set thinking off'
send '/set max_tokens 3000'
wait_for '^max_tokens = 3000$'
send 'Write a long Python module with many functions.'
wait_for '```python' 60
T send-keys -t chat C-c
wait_for '^\[stopped\]$' 30
wait_for '^\[[0-9]+ tok, .*stopped, seed' 10
n=$(screen | sed -n 's/^\[\([0-9]*\) tok, .*stopped, seed.*/\1/p' | tail -n 1)
[ "$n" -lt 3000 ] || fail "the stopped answer ran to $n tokens"
screen | grep -q CHAT-EXITED && fail "Ctrl-C left the chat"

# 4. /reset: the next prompt holds only the new question (as long as the first prompt was)
send '/reset'
wait_for '^conversation cleared$'
send '/set thinking on'
send '/set max_tokens 40'
send 'Show me the first lines of json/decoder.py'
wait_for "^\\[[0-9]+ tok, prefill $first_prefill tok " 60

# 5. a line ending in \ continues the message
send 'line one\'
send 'line two'
wait_for '^\.\.\. line two' 10
sleep 0.5
wait_for "^\\[[0-9]+ tok, prefill [0-9]+ tok" 60
send "/save $tmp/conv.json"
wait_for '^saved [0-9]+ messages'
node -e "const c = require('$tmp/conv.json'); const u = c.messages.filter(m => m.role === 'user');
         if (u.at(-1).content !== 'line one\nline two') { console.log('last user message:', JSON.stringify(u.at(-1))); process.exit(1); }" ||
    fail "the continued lines did not become one message"

# 6. history across runs; --hide-thinking
T send-keys -t chat C-d
wait_for '^CHAT-EXITED-0$' 10
grep -qx '/set temperature 0.7' "$tmp/history" || fail "history file lacks the inputs: $(cat "$tmp/history")"
start --hide-thinking --max-tokens 80
T send-keys -t chat Up
wait_for "^> /save $tmp/conv.json" 10
T send-keys -t chat C-u
send 'Show me the first lines of json/decoder.py'
wait_for '^\[[0-9]+ tok, prefill' 60
[ "$(count 'The user wants')" -eq 0 ] || fail "--hide-thinking printed the reasoning"
send '/quit'
wait_for '^CHAT-EXITED-0$' 10

# 7. not a terminal: stdout holds the answers only
printf 'Show me the first lines of json/decoder.py\n/set temperature 0\n' |
    "$bin" chat --no-history --max-tokens 60 >"$tmp/out" 2>"$tmp/err" || fail "piped chat exited with $?"
grep -q 'tool_call' "$tmp/out" || fail "no answer on stdout: $(cat "$tmp/out")"
grep -qE 'tok/verify|temperature|\x1b' "$tmp/out" && fail "stdout is not plain: $(cat -v "$tmp/out")"
grep -q 'tok/verify' "$tmp/err" && grep -q 'temperature = 0' "$tmp/err" || fail "stats and messages missing on stderr: $(cat "$tmp/err")"
echo "chat: all passed"
