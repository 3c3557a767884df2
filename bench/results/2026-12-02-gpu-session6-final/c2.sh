#!/usr/bin/env bash
# lead, session 6, call 2: park part 1 of the small model's xz'd tar in /tmp/smx (the machine keeps /tmp while warm)
mkdir -p /tmp/smx; cp .gpu-lead/sma/* /tmp/smx/; ls -la /tmp/smx build/mtplx
