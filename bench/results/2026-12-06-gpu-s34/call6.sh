#!/usr/bin/env bash
# Session 34 call 6 (the last 199 s of device time): the full 27B q4's 32k prefill on call 5's warm machine
# (call 5 ran out of time: the 35B-A3B synth took 427 s there against ~50 s in session 33). Printed nothing:
# `timeout 100` ended it — load + 32,768-token prefill of the 64-layer q4 shape takes more than 100 s.
ls /tmp/full27/config.json && MTPLX_DEVICE=cuda timeout 100 build/mtplx bench --device cuda --prefill 32768 --model /tmp/full27 2>&1 | tail -2
