#!/usr/bin/env bash
# session 18 call A: the small model's first half to /tmp/smx (call B brings the second)
mkdir -p /tmp/smx && cp .gpu-lead/sma/part00 /tmp/smx/ && ls -la /tmp/smx && nvidia-smi --query-gpu=name --format=csv,noheader
