#!/usr/bin/env bash
# stage the small model's two-call carry: f2 (sma: part-aa), f3 (smb: part-ab); "done" puts everything back
set -e; cd /work/main; S=/work/stash9
case "$1" in
f2) mkdir -p $S/models $S/tests; mv models/qwen35-tiny-code/*.safetensors.xz models/qwen35-tiny-code/golden.safetensors $S/models/; mv tests/data $S/tests/
    mkdir -p .gpu-lead/sma; ln -f /tmp/smx/part-aa .gpu-lead/sma/part-aa ;;
f3) rm -rf .gpu-lead/sma; mkdir -p .gpu-lead/smb; ln -f /tmp/smx/part-ab .gpu-lead/smb/part-ab ;;
done) rm -rf .gpu-lead/sma .gpu-lead/smb; mv $S/models/* models/qwen35-tiny-code/; mv $S/tests/data tests/; git status --short | head ;;
esac
