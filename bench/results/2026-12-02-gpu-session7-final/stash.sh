#!/usr/bin/env bash
# move the embedded model's shards, golden and tests/data out of the tree (for the small-model carry) or back
set -e; cd /work/main; S=/work/stash7
case "$1" in
out) mkdir -p $S/models $S/tests; mv models/qwen35-tiny-code/*.safetensors.xz models/qwen35-tiny-code/golden.safetensors $S/models/; mv tests/data $S/tests/ ;;
back) mv $S/models/* models/qwen35-tiny-code/; mv $S/tests/data tests/; git status --short | head ;;
esac
