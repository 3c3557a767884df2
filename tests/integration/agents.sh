#!/usr/bin/env bash
# agents.sh — four real coding-agent clients, unmodified, against `mtplx serve` on the embedded model:
# Claude Code (`claude -p`, Anthropic Messages), Codex (`codex exec`, Responses API, a custom
# provider), qwen-code (OpenAI chat) and opencode (`opencode run`, OpenAI chat through a custom
# provider). Each client (pinned in tests/js/package-lock.json) gets a temporary HOME and project dir
# holding json/decoder.py, and must
#   1. complete a tool-call round trip: the model calls a tool, the client sends the result back,
#      and the server answers that request too (checked on the exchanges a logging proxy saw,
#      tests/js/agent_proxy.mjs + agents_check.mjs), on servers run with --max-tokens 96 to keep
#      turns short and --temperature 0 (none of the clients sends one) so that runs repeat: --ctx
#      32768 (more than the model's max_position_embeddings of 8192; a 8.9k-token prompt is answered
#      there too) for Claude Code and qwen-code, which stop after two turns, and a context a few
#      turns larger than the first prompt for Codex and opencode, which have no working turn limit
#      and end on that overflow;
#   2. end cleanly on a context overflow: a server with --ctx 512 refuses the first request with the
#      API's own error, and the client exits by itself with a message (no hang, no crash).
# Nothing may reach the internet: the whole script re-runs itself in a new network namespace that
# has only a loopback interface, and each client's telemetry/update switches are off as well.
# MTPLX_AGENTS_FULL=1 also runs Claude Code with its full default system prompt and tool set
# (~15k tokens; slow: minutes of prefill) and requires well-formed answers.
set -u
cd "$(dirname "$0")/../.."
unset MTPLX_API_KEY ANTHROPIC_API_KEY ANTHROPIC_AUTH_TOKEN ANTHROPIC_BASE_URL OPENAI_API_KEY OPENAI_BASE_URL
[ -x build/mtplx ] || { echo "build/mtplx is needed (make test builds it)"; exit 1; }
[ -x tests/js/node_modules/.bin/claude ] || bash scripts/npm-deps.sh
BIN=tests/js/node_modules/.bin
for c in claude codex qwen opencode; do [ -x "$BIN/$c" ] || { echo "$BIN/$c is missing (scripts/npm-deps.sh installs it)"; exit 1; }; done

if [ -z "${MTPLX_AGENTS_NETNS:-}" ]; then
    if unshare -n true 2>/dev/null; then exec unshare -n env MTPLX_AGENTS_NETNS=1 bash "$0" "$@"; fi
    if unshare -rn true 2>/dev/null; then exec unshare -rn env MTPLX_AGENTS_NETNS=1 bash "$0" "$@"; fi
    echo "note: cannot make a network namespace here; relying on the clients' own off switches"
else
    ip link set lo up || { echo "cannot bring up loopback in the network namespace"; exit 1; }
    echo "network: a namespace with only: $(ip -o link show | awk -F': ' '{print $2}' | tr '\n' ' ')"
fi

# A fixed folder, not mktemp: each client puts its working directory's path (and the date) into its
# prompt, and the tiny model's answer depends on every token of it; a random path made the runs
# differ from one suite to the next. One suite at a time uses it (the lock).
tmp=${TMPDIR:-/tmp}/mtplx-agents
exec 9>"$tmp.lock"
flock -w 900 9 || { echo "another agents.sh holds $tmp.lock"; exit 1; }
rm -rf "$tmp" && mkdir -p "$tmp"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    if [ -n "${MTPLX_AGENTS_KEEP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
fail=0
MODEL=qwen35-tiny-code
# The tiny model does not call the tool for every wording of the request inside every client's prompt
# (a 96-token answer may end inside a made-up path), so a round trip tries these in turn (roundtrip).
# Measured 2026-12-01 with qwen-code: the first wording made the call from two different folders, the
# second and fourth from neither; before its extra tools were excluded, none did.
# Each attempt also gets its own project folder (proj-NAME-K), so a repeated wording meets another path.
PROMPTS=("Show me the first lines of json/decoder.py" "Read the file json/decoder.py"
         "Show me the first lines of json/decoder.py" "What is in json/decoder.py?")
PROMPT=${PROMPTS[0]}
SYS="You are a coding assistant. Use the tools to read files."

# serve NAME ARGS...: start `mtplx serve --port 0 ARGS` (not --quiet: the checks read its warnings in
# $tmp/NAME.err), wait for its listening line; sets $port
. tests/integration/lib.sh
serve() { serve_start build/mtplx "$@" || exit 1; }

# proxy NAME PORT: a logging proxy to the server on PORT; sets $url (http://127.0.0.1:P)
proxy() {
    local name=$1 target=$2
    node tests/js/agent_proxy.mjs "http://127.0.0.1:$target" "$tmp/$name.log" >"$tmp/$name.proxy" 2>&1 &
    pids+=("$!")
    for _ in $(seq 1 100); do
        local p; p=$(sed -n 's/proxy listening on \([0-9]*\)/\1/p' "$tmp/$name.proxy")
        if [ -n "$p" ]; then url="http://127.0.0.1:$p"; return 0; fi
        sleep 0.1
    done
    echo "proxy $name did not start"; exit 1
}

# project NAME: a fresh HOME and project dir for one client run; sets $home $proj
project() {
    home="$tmp/home-$1"; proj="$tmp/proj-$1"
    mkdir -p "$home" "$proj/json"
    printf '"""Implementation of JSONDecoder\n"""\nimport re\n\nfrom json import scanner\n\n__all__ = ["JSONDecoder", "JSONDecodeError"]\n' >"$proj/json/decoder.py"
}

claude_env() {
    env HOME="$home" ANTHROPIC_BASE_URL="$url" ANTHROPIC_API_KEY=test-key CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
        DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 DISABLE_BUG_COMMAND=1 \
        CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1 CLAUDE_CODE_MAX_CONTEXT_TOKENS="$1" \
        CLAUDE_CODE_MAX_OUTPUT_TOKENS=96 "${@:2}"
}
run_claude() { # CTX -- extra flags
    local ctx=$1; shift
    (cd "$proj" && claude_env "$ctx" timeout 300 "$OLDPWD/$BIN/claude" -p "$PROMPT" --model "$MODEL" --no-session-persistence \
        --strict-mcp-config "$@")
}

codex_home() { # writes a config.toml for the provider at $url
    mkdir -p "$home/codex"
    echo "$SYS" >"$home/codex/instructions.md"
    cat >"$home/codex/config.toml" <<EOT
model = "$MODEL"
model_instructions_file = "$home/codex/instructions.md"
web_search = "disabled"
model_provider = "mtplx"
model_context_window = $1
check_for_update_on_startup = false
[model_providers.mtplx]
name = "mtplx"
base_url = "$url/v1"
wire_api = "responses"
env_key = "MTPLX_TEST_KEY"
[analytics]
enabled = false
[otel]
exporter = "none"
EOT
}
run_codex() {
    (cd "$proj" && env HOME="$home" CODEX_HOME="$home/codex" MTPLX_TEST_KEY=test-key \
        timeout "${1:-300}" "$OLDPWD/$BIN/codex" exec --skip-git-repo-check --ephemeral -s read-only "$PROMPT")
}

run_qwen() {
    mkdir -p "$home/.qwen"
    # off: usage statistics, telemetry, update checks; and, to keep the prompt short, the bundled
    # skills list and the memory instructions
    echo '{"security":{"auth":{"selectedType":"openai"}},"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},"general":{"disableAutoUpdate":true,"disableUpdateNag":true},"memory":{"enableManagedAutoMemory":false},"skills":{"disabled":["batch","browser-use","computer-use","dataviz","extension-creator","goal-draft","loop","new-app","qc-helper","review","simplify","stuck","workflow-authoring","workflow-creator"]}}' >"$home/.qwen/settings.json"
    (cd "$proj" && env HOME="$home" QWEN_CODE_SUPPRESS_YOLO_WARNING=1 timeout 300 "$OLDPWD/$BIN/qwen" "$PROMPT" --auth-type openai \
        --openai-base-url "$url/v1" --openai-api-key test-key -m "$MODEL" --core-tools read_file --system-prompt "$SYS" \
        --exclude-tools agent get_goal list_agents skill tool_call tool_search update_goal enter_worktree exit_worktree record_artifact report_findings send_message task_stop \
        --max-session-turns 2 --approval-mode yolo)
}

run_opencode() { # CTX
    local cfg
    cfg=$(printf '{"autoupdate":false,"share":"disabled","model":"mtplx/%s","provider":{"mtplx":{"npm":"@ai-sdk/openai-compatible","name":"mtplx","options":{"baseURL":"%s/v1","apiKey":"test-key"},"models":{"%s":{"name":"%s","limit":{"context":%d,"output":96}}}}},"agent":{"build":{"steps":2,"maxSteps":2,"prompt":"%s"}},"tools":{"bash":false,"edit":false,"write":false,"webfetch":false,"task":false,"todowrite":false,"glob":false,"grep":false,"skill":false,"list":false}}' \
        "$MODEL" "$url" "$MODEL" "$MODEL" "$1" "$SYS")
    (cd "$proj" && env HOME="$home" XDG_CONFIG_HOME="$home/.config" XDG_DATA_HOME="$home/.local/share" XDG_CACHE_HOME="$home/.cache" \
        OPENCODE_CONFIG_CONTENT="$cfg" OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1 \
        OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_SHARE=1 OPENCODE_DISABLE_AUTOCOMPACT=1 OPENCODE_DISABLE_PRUNE=1 OPENCODE_DISABLE_CLAUDE_CODE=1 OPENCODE_DISABLE_EXTERNAL_SKILLS=1 \
        timeout 300 "$OLDPWD/$BIN/opencode" run "$PROMPT")
}

# check NAME MODE API: the exchange log of one run
check() {
    if ! node tests/js/agents_check.mjs "$2" "$3" "$tmp/$1.log"; then
        echo "--- $1 client output:"; tail -20 "$tmp/$1.client"; fail=1
    fi
}
# roundtrip NAME API PORT RUN [ARGS...]: a fresh project and proxy to PORT, then `RUN ARGS`, once per
# prompt of PROMPTS until the exchange log holds a tool-call round trip; fails if none does
roundtrip() {
    local name=$1 api=$2 target=$3 k=0 rc; shift 3
    for PROMPT in "${PROMPTS[@]}"; do
        k=$((k + 1))
        project "$name-$k"; proxy "$name-$k" "$target"
        rc=0; "$@" >"$tmp/$name-$k.client" 2>&1 || rc=$?
        if node tests/js/agents_check.mjs roundtrip "$api" "$tmp/$name-$k.log"; then
            ended "$name-$k" "$rc"; return 0
        fi
        echo "$name: no round trip with prompt $k ($PROMPT)"
    done
    echo "--- $name client output (last prompt):"; tail -20 "$tmp/$name-$k.client"; fail=1
}
# ended NAME RC: the client exited by itself (not killed by the timeout or a signal)
ended() {
    if [ "$2" -ge 124 ]; then echo "$1: the client did not end by itself (exit $2)"; tail -20 "$tmp/$1.client"; fail=1; fi
}

serve big --ctx 32768 --max-tokens 96 --temperature 0
big=$port
serve small --ctx 512 --max-tokens 96 --temperature 0
small=$port
grep -q "more than this model was trained for" "$tmp/big.err" || { echo "no warning for --ctx past max_position_embeddings"; fail=1; }

# positions past max_position_embeddings (8192) are served: a prompt of about 8.6k tokens is answered
node -e '
const text = require("fs").readFileSync("models/qwen35-tiny-code/val_code.txt", "utf8").slice(0, 34000);
fetch(process.argv[1] + "/v1/completions", {method: "POST", headers: {"content-type": "application/json"},
      body: JSON.stringify({prompt: text, max_tokens: 8})}).then(r => r.json()).then(j => {
    const u = j.usage || {};
    if (!(u.prompt_tokens > 8192 && u.completion_tokens > 0 && j.choices[0].finish_reason)) { console.log(JSON.stringify(j).slice(0, 400)); process.exit(1); }
    console.log("a " + u.prompt_tokens + "-token prompt on --ctx 32768: answered (" + j.choices[0].finish_reason + ")");
}).catch(e => { console.log(String(e)); process.exit(1); });' "http://127.0.0.1:$big" || { echo "a prompt past 8192 tokens was not answered"; fail=1; }

# MTPLX_AGENTS_ONLY="claude codex" runs some of them (while working on one)
want() { [ -z "${MTPLX_AGENTS_ONLY:-}" ] || [[ " $MTPLX_AGENTS_ONLY " == *" $1 "* ]]; }
t0=$SECONDS
if want claude; then
# ---- Claude Code (default mode; one tool, a short system prompt, two turns) ----
roundtrip claude anthropic "$big" run_claude 32768 --tools Read --system-prompt "$SYS" --max-turns 2
PROMPT=${PROMPTS[0]}
project claude-overflow; proxy claude-overflow "$small"
run_claude 32768 --tools Read --system-prompt "$SYS" --max-turns 2 >"$tmp/claude-overflow.client" 2>&1; rc=$?
ended claude-overflow $rc; check claude-overflow overflow anthropic
grep -qi "prompt is too long" "$tmp/claude-overflow.client" || { echo "claude did not report the overflow:"; cat "$tmp/claude-overflow.client"; fail=1; }
if [ -n "${MTPLX_AGENTS_FULL:-}" ]; then # the default system prompt and tools (~15k tokens)
    project claude-full; proxy claude-full "$big"
    run_claude 32768 --max-turns 1 >"$tmp/claude-full.client" 2>&1
    check claude-full answered anthropic
fi
echo "claude: $((SECONDS - t0))s"; t0=$SECONDS
fi
if want opencode; then

# ---- opencode (custom OpenAI-compatible provider, the read tool) ----
# opencode keeps going while the model calls tools (its step limit did not stop it), so the round trip
# runs on a server whose context (about 2.2k tokens of prompt) holds a few turns: it ends on the overflow
serve opencode-mid --ctx 2700 --max-tokens 96 --temperature 0
roundtrip opencode chat "$port" run_opencode 32768
PROMPT=${PROMPTS[0]}
project opencode-overflow; proxy opencode-overflow "$small"
run_opencode 32768 >"$tmp/opencode-overflow.client" 2>&1; rc=$?
ended opencode-overflow $rc; check opencode-overflow overflow chat
echo "opencode: $((SECONDS - t0))s"; t0=$SECONDS
fi
if want qwen; then

# ---- qwen-code (OpenAI chat; read_file only, two turns) ----
roundtrip qwen chat "$big" run_qwen
PROMPT=${PROMPTS[0]}
project qwen-overflow; proxy qwen-overflow "$small"
run_qwen >"$tmp/qwen-overflow.client" 2>&1; rc=$?
ended qwen-overflow $rc; check qwen-overflow overflow chat
echo "qwen-code: $((SECONDS - t0))s"; t0=$SECONDS
fi
if want codex; then

# ---- Codex (exec, Responses API through a custom provider) ----
# Codex has no turn limit and the model repeats its call after the "unsupported call" result, so the
# round trip runs on a server whose context holds the first prompt and a few turns: the run then ends
# by itself on the overflow (which Codex must handle cleanly too). The overflow run on the small
# server comes first and tells the first prompt's size.
project codex-overflow; proxy codex-overflow "$small"; codex_home 32768
run_codex 300 >"$tmp/codex-overflow.client" 2>&1; rc=$?
ended codex-overflow $rc; check codex-overflow overflow responses
n=$(grep -ho 'the input is [0-9]* tokens' "$tmp/small.err" | tail -1 | grep -o '[0-9]*')
serve codex-mid --ctx $(( ${n:-8000} + 250 )) --max-tokens 96 --temperature 0
codex_run() { codex_home 32768; run_codex 300; }
roundtrip codex responses "$port" codex_run
PROMPT=${PROMPTS[0]}
echo "codex: $((SECONDS - t0))s"
fi

echo "--- request fields the server ignored (its log):"
grep -h "ignoring request fields" "$tmp"/*.err | sort -u
[ $fail -eq 0 ] && echo "agents integration: all passed"
exit $fail
