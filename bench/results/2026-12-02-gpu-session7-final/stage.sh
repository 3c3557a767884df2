#!/usr/bin/env bash
# stage F2 (sma: part-00) or F3 (smb: part-01) of the small model's carry; "done" puts everything back
set -e; cd /work/main
case "$1" in
f2) bash .gpu-lead/s7/stash.sh out; mkdir -p .gpu-lead/sma; ln -f /tmp/smx/part-00 .gpu-lead/sma/part-00 ;;
f3) rm -rf .gpu-lead/sma; mkdir -p .gpu-lead/smb; ln -f /tmp/smx/part-01 .gpu-lead/smb/part-01 ;;
done) rm -rf .gpu-lead/sma .gpu-lead/smb; bash .gpu-lead/s7/stash.sh back ;;
esac
