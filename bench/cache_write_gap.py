#!/usr/bin/env python3
"""cache_write_gap.py - what a request's end costs the other streams when the prefix cache has a disk tier.

Usage (repo root, a server started with --cache-dir):
  python3 bench/cache_write_gap.py BASE_URL [--prompt-tokens N] [--max-tokens M] [--delay S] [--rounds R]

Each round: stream B (a short code prompt, M tokens, T 0) starts; S seconds later request A (a ~N-token
prompt of this repo's C sources under a fresh first line, so no cache holds it; 4 tokens) starts, also
streamed. With --cache-dir a request's end hands its conversation's checkpoints to the disk tier, and
the copy of their KV and GDN state holds the model (docs/prefix-cache.md). Reported per round, in ms:
B's median gap between deliveries, B's longest gap that overlaps A's end (from A's last token to its
[DONE]: where the copy ran), A's last-token-to-[DONE] time and B's own. Standard library only."""
import argparse
import glob
import json
import os
import socket
import statistics
import threading
import time
import urllib.parse


def source_text(chars):
    out, n = [], 0
    for path in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "src", "*", "*.c"))):
        t = open(path, encoding="utf-8", errors="replace").read()
        out.append(t)
        n += len(t)
        if n >= chars:
            break
    return "".join(out)[:chars]


def stream(base, prompt, max_tokens, rec):
    """POST a streamed /v1/completions; rec['t'] gets the receive time of each data event with text,
    rec['done'] the time of [DONE]."""
    u = urllib.parse.urlparse(base)
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True}).encode()
    s = socket.create_connection((u.hostname, u.port or 80))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    rec["t"], buf = [], b""
    while True:
        d = s.recv(65536)
        now = time.monotonic()
        if not d:
            break
        buf += d
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            line = ev.split(b"data: ", 1)[-1]
            if line.strip() == b"[DONE]":
                rec["done"] = now
            elif b'"text"' in line and b'"text":""' not in line.replace(b" ", b""):
                rec["t"].append(now)
    s.close()


def one_round(args, k):
    b, a = {}, {}
    long_prompt = "// round %d %f\n" % (k, time.time()) + source_text(int(args.prompt_tokens * 3.2))
    tb = threading.Thread(target=stream, args=(args.url, "static int parse_config(const char *s) {\n",
                                               args.max_tokens, b))
    tb.start()
    time.sleep(args.delay)
    stream(args.url, long_prompt, 4, a)
    tb.join()
    ts = b["t"]
    gaps = [(y - x, x, y) for x, y in zip(ts, ts[1:])]
    a_last, a_done = a["t"][-1], a["done"]
    around = [g for g, x, y in gaps if x <= a_done and y >= a_last]
    if a_done > ts[-1]:
        print("  warning: B ended before A; raise --max-tokens")
    return (statistics.median(g for g, _, _ in gaps) * 1e3, max(around) * 1e3 if around else float("nan"),
            (a_done - a_last) * 1e3, (b["done"] - ts[-1]) * 1e3, len(ts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--prompt-tokens", type=int, default=3000)
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print("round  B median gap ms  B gap at A's end ms  A last->DONE ms  B last->DONE ms  B deliveries")
    for k in range(args.rounds):
        r = one_round(args, k)
        print("%5d  %15.1f  %19.1f  %15.1f  %15.1f  %12d" % ((k,) + r))


if __name__ == "__main__":
    main()
