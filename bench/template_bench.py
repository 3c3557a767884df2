#!/usr/bin/env python3
"""template_bench.py -- time `mtplx template` against Python Jinja2 configured as HF configures it
(tools/jinja_goldens.py make_env), on the same long conversation and real chat template, side by
side in one run. Reports the median CPU time of each (user+sys: the build machine is shared, so wall
time mostly measures other people's jobs) and the ratio. mtplx's time is the whole process (read
request, load and parse the template, adapt, render, write); Python's is compile+render only.

usage: python3 bench/template_bench.py [--model DIR] [--turns N] [--reps R]
(needs build/mtplx and Python Jinja2; the machine may be loaded: compare ratios, not absolutes)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import resource
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from jinja_goldens import make_env  # noqa: E402


def conversation(turns):
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
              "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
    msgs = [{"role": "system", "content": "You are a careful coding assistant."}]
    body = "def f(x):\n    return x * 2  # " + "lorem ipsum " * 40 + "\n"
    for i in range(turns):
        msgs.append({"role": "user", "content": f"Question {i}: what does this do?\n{body}"})
        msgs.append({"role": "assistant", "content": "",
                     "tool_calls": [{"id": f"c{i}", "type": "function",
                                     "function": {"name": "read_file", "arguments": {"path": f"src/f{i}.py"}}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": body})
        msgs.append({"role": "assistant", "content": f"It doubles x (turn {i})."})
    msgs.append({"role": "user", "content": "Thanks"})
    return {"messages": msgs, "tools": tools}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/qwen35-tiny-code")
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    req = conversation(a.turns)
    cfg = json.load(open(os.path.join(a.model, "tokenizer_config.json")))
    src = cfg["chat_template"]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(req, f)
        path = f.name
    env = make_env()
    special = {}
    for k in ("bos_token", "eos_token", "unk_token", "pad_token"):
        v = cfg.get(k)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            special[k] = v
    py, c = [], []
    out_c = out_py = None
    for _ in range(a.reps):
        t0 = time.process_time()
        out_py = env.from_string(src).render(messages=req["messages"], tools=req["tools"], documents=None,
                                             add_generation_prompt=True, **special)
        py.append(time.process_time() - t0)
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        out_c = subprocess.run(["build/mtplx", "template", "--model", a.model, "--request", path],
                               capture_output=True, check=True).stdout.decode()
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        c.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    os.unlink(path)
    same = out_c == out_py
    mp, mc = statistics.median(py), statistics.median(c)
    print(f"template {a.model}, {len(req['messages'])} messages, prompt {len(out_py.encode())} bytes, identical={same}")
    print(f"python jinja2 (compile+render, in process), CPU: {mp * 1e3:8.1f} ms")
    print(f"mtplx template (whole process), CPU:           {mc * 1e3:8.1f} ms")
    print(f"ratio python/mtplx: {mp / mc:.2f}x")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
