#!/usr/bin/env bash
# pull.sh — `mtplx pull`, `mtplx models` and `--model ORG/NAME` against a local fake hub
# (tests/integration/fake_hub.mjs, which serves the embedded model with the hub's API shapes):
# a clean pull through the CDN-like redirect and the paginated tree, files identical to the source,
# the HF cache layout; a second pull finds everything cached; `run` from the cache gives the same
# tokens as from the directory; 401 / 403 / token file for a gated repo; 404 repo and revision; a
# corrupted file rejected and its partial file deleted; a download cut mid-file resumed by the next
# pull with a Range request and the right sha256; a pull larger than the free space refused;
# progress on stderr (silent with --quiet/--json); `models` and `models rm`. Runs the ASan build of
# the CLI when it exists.
set -u
cd "$(dirname "$0")/../.."
BIN=build/mtplx
[ -x build/asan/mtplx ] && BIN=build/asan/mtplx
BIN=${MTPLX_BIN:-$BIN} # tests/mutations/*.patch checks name the binary they rebuilt
SRC=models/qwen35-tiny-code
tmp=$(mktemp -d /tmp/mtplx_pull_sh.XXXXXX)
hub_pid=
cleanup() { [ -n "$hub_pid" ] && kill "$hub_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
toks() { grep -o '"tokens": *\[[^]]*\]' "$1"; } # the completion ids of a `run --json` line
# jcheck FILE EXPR MSG [EXPR MSG]...: each JS expression over the parsed JSON `j` must be true (one node
# process for all of them; node's start-up dominates this script's time otherwise).
jcheck() {
    local out
    out=$(node -e '
        const fs = require("fs"); let j;
        try { j = JSON.parse(fs.readFileSync(process.argv[1], "utf8")); } catch (e) { console.log("not JSON: " + e.message); process.exit(); }
        const a = process.argv.slice(2);
        for (let i = 0; i < a.length; i += 2) {
            let ok = false;
            try { ok = eval(a[i]) === true; } catch (e) {}
            if (!ok) console.log(a[i + 1] + " (" + a[i] + ")");
        }' "$@") || out="node failed"
    [ -z "$out" ] || bad "$1: $out"
}

node tests/integration/fake_hub.mjs "$SRC" "$tmp/hub.log" >"$tmp/port" &
hub_pid=$!
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
[ -s "$tmp/port" ] || { echo "FAIL: fake hub did not start"; exit 1; }
export HF_ENDPOINT="http://127.0.0.1:$(cat "$tmp/port")" HF_HOME="$tmp/hf" MTPLX_PROGRESS_INTERVAL=0
unset HF_TOKEN HF_HUB_CACHE HUGGINGFACE_HUB_CACHE HUGGING_FACE_HUB_TOKEN HF_TOKEN_PATH
CACHE=$tmp/hf/hub
REPO=$CACHE/models--test--tiny

# ---- help is true for both commands ----
"$BIN" pull --help | grep -q "^usage: mtplx pull ORG/NAME" || bad "pull --help"
"$BIN" models --help | grep -q "^usage: mtplx models" || bad "models --help"
"$BIN" pull >/dev/null 2>&1; [ $? = 2 ] || bad "pull without a repository is not a usage error"
"$BIN" pull 'not a repo' >/dev/null 2>&1; [ $? = 2 ] || bad "pull of a malformed reference is not a usage error"

# ---- a clean pull ----
"$BIN" pull test/tiny >"$tmp/out.txt" 2>"$tmp/err.txt"
[ $? = 0 ] || bad "pull test/tiny failed: $(cat "$tmp/err.txt")"
commit=$(cat "$REPO/refs/main" 2>/dev/null)
[[ "$commit" =~ ^[0-9a-f]{40}$ ]] || bad "refs/main does not hold a commit: '$commit'"
SNAP=$REPO/snapshots/$commit
n_src=0
for f in "$SRC"/*; do
    b=$(basename "$f"); case $b in *.xz) continue;; esac
    n_src=$((n_src + 1))
    [ -L "$SNAP/$b" ] || { bad "$b is not a link in the snapshot"; continue; }
    target=$(readlink "$SNAP/$b")
    [[ "$target" == ../../blobs/* ]] || bad "$b links to '$target', not ../../blobs/<etag>"
    cmp -s "$f" "$SNAP/$b" || bad "$b differs from the source"
done
# LFS files are stored under their sha256, like huggingface_hub does
sha=$(sha256sum "$SRC/config.json" | cut -c1-64)
[ -e "$REPO/blobs/$sha" ] && bad "config.json (not LFS) stored under its sha256"
sha=$(sha256sum "$SRC/model-00001-of-00004.safetensors" | cut -c1-64)
[ -f "$REPO/blobs/$sha" ] || bad "model-00001 is not stored as blobs/<its sha256>"
ls "$REPO/blobs" | grep -q incomplete && bad "an .incomplete file was left after a clean pull"
grep -q '"url":"/cdn/test/tiny/' "$tmp/hub.log" || bad "the CDN redirect was not followed"
grep -q 'cursor=4' "$tmp/hub.log" || bad "the second page of the file list was not fetched"
grep -q "^pull: done, 5[0-9].[0-9] MB" "$tmp/err.txt" || bad "no progress lines on stderr: $(cat "$tmp/err.txt")"
grep -q "14 files" "$tmp/out.txt" || bad "summary: $(cat "$tmp/out.txt")"
[ "$n_src" = 14 ] || bad "expected 14 source files, found $n_src"

# ---- again: everything cached, nothing fetched, silent with --json ----
: >"$tmp/hub.log"
"$BIN" pull test/tiny --json >"$tmp/out.json" 2>"$tmp/err.txt" || bad "second pull failed"
jcheck "$tmp/out.json" 'j.downloaded === 0' "second pull downloaded again" "j.commit === '$commit'" "--json commit differs" \
    'j.files === 14 && j.bytes > 45e6' "--json files / bytes"
[ -s "$tmp/err.txt" ] && bad "--json wrote to stderr: $(cat "$tmp/err.txt")"
grep -q '/cdn/' "$tmp/hub.log" && bad "second pull fetched file contents"
"$BIN" pull test/tiny --quiet >/dev/null 2>"$tmp/err.txt"; [ -s "$tmp/err.txt" ] && bad "--quiet wrote to stderr"

# ---- the cached model runs; same tokens as the source directory ----
args=(--prompt-tokens 750,1204,7,286 --max-tokens 6 --temperature 0 --seed 3 --json)
"$BIN" run --model test/tiny "${args[@]}" >"$tmp/a.json" 2>"$tmp/err.txt" || bad "run --model test/tiny: $(cat "$tmp/err.txt")"
build/mtplx run --model "$SRC" "${args[@]}" >"$tmp/b.json" 2>/dev/null || bad "run --model $SRC failed"
[ -n "$(toks "$tmp/a.json")" ] && [ "$(toks "$tmp/a.json")" = "$(toks "$tmp/b.json")" ] || bad "cached model gives other tokens"
"$BIN" inspect --model "test/tiny@main" --json >"$tmp/i.json" || bad "inspect --model test/tiny@main"
grep -q "\"model\": \"$SNAP\"" "$tmp/i.json" || bad "test/tiny@main did not resolve to the snapshot"
"$BIN" inspect --model "test/tiny@$commit" >/dev/null || bad "inspect --model test/tiny@<commit>"
"$BIN" run --model test/absent --prompt x >/dev/null 2>"$tmp/err.txt"
[ $? = 1 ] && grep -q "mtplx pull test/absent" "$tmp/err.txt" || bad "uncached --model: $(cat "$tmp/err.txt")"

F1=model-00001-of-00004.safetensors
# ---- gated: 401 without a token, 403 with a wrong one, the token file works ----
"$BIN" pull test/gated --quiet 2>"$tmp/err.txt"
[ $? = 1 ] && grep -q "401" "$tmp/err.txt" && grep -q "HF_TOKEN" "$tmp/err.txt" || bad "gated without token: $(cat "$tmp/err.txt")"
HF_TOKEN=wrong "$BIN" pull test/gated --quiet 2>"$tmp/err.txt"
[ $? = 1 ] && grep -q "403" "$tmp/err.txt" && grep -q "token from HF_TOKEN was refused" "$tmp/err.txt" || bad "gated with a wrong token: $(cat "$tmp/err.txt")"
mkdir -p "$tmp/hf" && echo hf_secret >"$tmp/hf/token"
"$BIN" pull test/gated --quiet --include '*.json' >/dev/null 2>"$tmp/err.txt" || bad "gated with the token file: $(cat "$tmp/err.txt")"
grep -q '"auth":"Bearer hf_secret"' "$tmp/hub.log" || bad "the token file's token was not sent"
[ -L "$CACHE/models--test--gated/snapshots/$commit/config.json" ] || bad "gated pull did not link config.json"
[ -e "$CACHE/models--test--gated/snapshots/$commit/$F1" ] && bad "--include '*.json' fetched a safetensors file"
rm -f "$tmp/hf/token"

# ---- 404: repository, revision ----
"$BIN" pull test/nothing --quiet 2>"$tmp/err.txt"; rc=$?
[ $rc = 1 ] && grep -q "repository not found" "$tmp/err.txt" || bad "404 repo: rc $rc, $(cat "$tmp/err.txt")"
"$BIN" pull test/tiny@v9 --quiet 2>"$tmp/err.txt"; rc=$?
[ $rc = 1 ] && grep -q "revision not found" "$tmp/err.txt" || bad "404 revision: rc $rc, $(cat "$tmp/err.txt")"

# ---- not enough free space: refused before anything is downloaded ----
"$BIN" pull test/huge --quiet 2>"$tmp/err.txt"; rc=$?
[ $rc = 1 ] && grep -q "disk full: test/huge needs 1000000.* GB more" "$tmp/err.txt" || bad "disk full: rc $rc, $(cat "$tmp/err.txt")"
ls "$CACHE/models--test--huge/blobs" 2>/dev/null | grep -q . && bad "disk full: files were downloaded"

# ---- a corrupted file is rejected, its partial file deleted, never linked ----
bad_sha=$(sha256sum "$SRC/model-00004-of-00004.safetensors" | cut -c1-64)
"$BIN" pull test/corrupt --quiet --jobs 1 2>"$tmp/err.txt"; rc=$?
[ $rc = 1 ] && grep -q "checksum mismatch" "$tmp/err.txt" || bad "corrupt: rc $rc, $(cat "$tmp/err.txt")"
C=$CACHE/models--test--corrupt
[ -e "$C/blobs/$bad_sha" ] && bad "corrupt blob kept"
[ -e "$C/blobs/$bad_sha.incomplete" ] && bad "corrupt partial file kept"
[ -e "$C/snapshots/$commit/model-00004-of-00004.safetensors" ] && bad "corrupt file linked into the snapshot"
"$BIN" run --model test/corrupt --prompt-tokens 1,2 --max-tokens 1 >/dev/null 2>&1 && bad "a model with a rejected file ran"

# ---- a cut transfer leaves a partial file; the next pull resumes it with a Range request ----
sha1=$(sha256sum "$SRC/$F1" | cut -c1-64)
FL=$CACHE/models--test--flaky
"$BIN" pull test/flaky --quiet --retries 0 --jobs 1 2>"$tmp/err.txt"; rc=$?
[ $rc = 1 ] && grep -q "transfer cut" "$tmp/err.txt" || bad "interrupted pull: rc $rc, $(cat "$tmp/err.txt")"
part=$(stat -c %s "$FL/blobs/$sha1.incomplete" 2>/dev/null || echo 0)
full=$(stat -c %s "$SRC/$F1")
[ "$part" -gt 0 ] && [ "$part" -lt "$full" ] || bad "partial file has $part bytes (full $full)"
"$BIN" pull test/flaky --json >"$tmp/out.json" 2>"$tmp/err.txt" || bad "resuming pull failed: $(cat "$tmp/err.txt")"
jcheck "$tmp/out.json" 'j.resumed >= 1' "resume not reported"
grep -q "\"url\":\"/cdn/test/flaky/$sha1\",\"range\":\"bytes=$part-\",\"auth\":null,\"status\":206" "$tmp/hub.log" ||
    bad "no Range request bytes=$part- for the partial file"
[ "$(sha256sum "$FL/blobs/$sha1" | cut -c1-64)" = "$sha1" ] || bad "resumed file has the wrong sha256"
ls "$FL/blobs" | grep -q incomplete && bad "partial files left after the resume"
"$BIN" run --model test/flaky "${args[@]}" >"$tmp/c.json" 2>/dev/null || bad "run from the resumed download"
[ "$(toks "$tmp/c.json")" = "$(toks "$tmp/b.json")" ] || bad "resumed model gives other tokens"

# ---- models: list, rm ----
"$BIN" models --json "$SRC" >"$tmp/m.json" || bad "models --json"
t='j.models.find(m => m.name === "test/tiny@main")'
jcheck "$tmp/m.json" "j.cache === '$CACHE'" "cache dir" \
    "$t.format === 'bf16'" "test/tiny format" "$t.family === 'qwen3_5'" "test/tiny family" \
    "$t.tier === 'verified'" "test/tiny tier" "$t.mtp === true" "test/tiny MTP head" \
    "$t.bytes > 45e6 && $t.bytes < 60e6" "test/tiny size" "$t.source === 'cache' && $t.commit === '$commit'" "test/tiny source" \
    'j.models.find(m => m.repo === "test/corrupt").incomplete === true' "a snapshot missing a file is not marked incomplete" \
    'j.models.filter(m => m.source === "embedded").length === 1' "embedded model missing" \
    'j.models.filter(m => m.source === "local").length === 1' "the directory given is missing"
"$BIN" models | grep -q "^test/flaky@main  *bf16  *qwen3_5  *verified  *yes" || bad "models table: $("$BIN" models)"
"$BIN" models rm test/tiny >"$tmp/out.txt" || bad "models rm test/tiny"
[ -e "$REPO" ] && bad "models rm left $REPO"
"$BIN" models rm test/tiny >/dev/null 2>&1; [ $? = 1 ] || bad "rm of an uncached model is not an error"
"$BIN" models rm 'bad ref' >/dev/null 2>&1; [ $? = 2 ] || bad "rm of a malformed reference is not a usage error"

[ $fail = 0 ] && echo "pull.sh: all checks passed"
exit $fail
