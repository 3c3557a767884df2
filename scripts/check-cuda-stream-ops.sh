#!/usr/bin/env bash
# Fail when a CUDA backend file queues work on the stream around the step-graph recorder
# (src/backend/cuda/cuda_graph.cu; docs/architecture.md, "Step graphs"). While a forward is recorded,
# launches, device copies and zero fills must go through cu_launch / cu_copy_async / cu_zero_async so
# they keep their order; a raw `<<<...>>>` launch, cudaMemcpyAsync or cudaMemsetAsync would run before
# the recorded work. A raw one is allowed only where the host has already ended any recording
# (cu_graph_break, or outside any forward): such a line, or the line before it, says `graph-safe`.
# cuda_graph.cu (the recorder itself) and cu_launch_pdl in cuda_internal.cuh are exempt.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(for f in src/backend/cuda/*.cu src/backend/cuda/*.cuh; do
    case "$f" in */cuda_graph.cu) continue ;; esac
    awk -v f="$f" '
        /cudaLaunchKernelEx\(&cfg, k, args\.\.\.\)/ { prev = $0; next } # cu_launch_pdl itself
        /<<<|cudaMemcpyAsync\(|cudaMemsetAsync\(|cudaLaunchKernel/ {
            if ($0 !~ /graph-safe/ && prev !~ /graph-safe/) printf "%s:%d: %s\n", f, FNR, $0
        }
        { prev = $0 }' "$f"
done)
if [ -n "$bad" ]; then
    echo "check-cuda-stream-ops: stream work that bypasses the step-graph recorder (mark it graph-safe only after cu_graph_break):" >&2
    echo "$bad" >&2
    exit 1
fi
echo "check-cuda-stream-ops: every raw stream op of src/backend/cuda is marked graph-safe"
