#!/usr/bin/env python3
"""soak.py — mixed load against `mtplx serve` for a given duration (issue 18; docs/reliability.md).

Starts the server (--bin, default build/mtplx) with a small queue, first records every greedy
request's solo answer one at a time, then runs --clients threads that each pick at random: every
API (chat, completions, responses, messages) streaming and not, tool calls, stop strings, a stream
cancelled after its first bytes, a stream whose reader stalls for seconds before reading on,
malformed JSON (400), an oversized body (413), and bursts of concurrent requests past --max-queue
(429 with Retry-After), and long prompts never sent before (they fill the prefix cache, which must
stay within its --cache-ram budget). Every 200 answer must equal its solo answer (same text, tool
calls and finish reason). Samples the server's RSS, open descriptors and threads, and the prefix
cache's byte gauges on /metrics, every --sample seconds.

Prints a markdown report (requests by kind and outcome, p50/p99 latency per window, RSS / fds /
threads over time) and a JSON line; exits 1 on a wrong answer, an unexpected status, a dead server,
a sanitizer report, a hang, or growth after warm-up (RSS more than --rss-slack MiB above its level
at the end of the first quarter; descriptors or threads above their warm-up level once idle).
Usage: python3 tests/soak/soak.py --duration 20 [--bin build/asan/mtplx] [--clients 4]
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SAN_RE = re.compile(r"AddressSanitizer|LeakSanitizer|runtime error:")
TEXT_KEYS = {"content", "reasoning_content", "text", "thinking", "arguments", "partial_json", "name"}

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
PROMPTS = ["def fib(n):", "import numpy as np\n", "class Stack:", "# sort a list\n", "SELECT * FROM", "fn main() {"]


def bodies(n_prompts):
    """the greedy request bodies: (name, path, body), 10 per prompt"""
    out = []
    for i, p in enumerate(PROMPTS[:n_prompts]):
        for stream in (False, True):
            s = "-stream" if stream else ""
            msg = [{"role": "user", "content": p}]
            out.append(("chat%s-%d" % (s, i), "/v1/chat/completions",
                        {"model": "m", "messages": msg, "max_tokens": 12, "temperature": 0, "stream": stream}))
            out.append(("completions%s-%d" % (s, i), "/v1/completions",
                        {"model": "m", "prompt": p, "max_tokens": 12, "temperature": 0, "stream": stream}))
            out.append(("responses%s-%d" % (s, i), "/v1/responses",
                        {"model": "m", "input": p, "max_output_tokens": 12, "temperature": 0, "stream": stream}))
            out.append(("messages%s-%d" % (s, i), "/v1/messages",
                        {"model": "m", "messages": msg, "max_tokens": 12, "temperature": 0, "stream": stream}))
        out.append(("tools-%d" % i, "/v1/chat/completions",
                    {"model": "m", "messages": [{"role": "user", "content": "Weather in Paris? " + p}], "tools": TOOLS,
                     "max_tokens": 24, "temperature": 0}))
        out.append(("stop-%d" % i, "/v1/completions",
                    {"model": "m", "prompt": p, "max_tokens": 16, "temperature": 0, "stop": ["\n", "(", " "]}))
    return out


def signature(obj, acc):
    """the text-bearing fields of a body or stream frame, in document order"""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in TEXT_KEYS and isinstance(v, str):
                acc.append(v)
            elif k in ("finish_reason", "stop_reason", "status") and isinstance(v, str):
                acc.append("<%s>" % v)
            elif k not in ("id", "item_id", "mtplx", "usage", "created", "created_at"):
                signature(v, acc)
    elif isinstance(obj, list):
        for v in obj:
            signature(v, acc)
    return acc


def answer(data, stream):
    """(ok, signature) of a 200 body: streams must end with their API's closing frame"""
    if not stream:
        return True, "".join(signature(json.loads(data), []))
    acc, closed = [], False
    for line in data.decode("utf-8", "replace").split("\n"):
        if not line.startswith("data: "):
            continue
        d = line[6:]
        if d == "[DONE]":
            closed = True
            continue
        j = json.loads(d)
        if isinstance(j, dict) and j.get("type") in ("message_stop", "response.completed", "response.incomplete"):
            closed = True
        if isinstance(j, dict) and j.get("type") in ("response.output_text.done", "response.reasoning_text.done",
                                                     "response.content_part.done", "response.output_item.done",
                                                     "response.completed", "response.incomplete", "response.created",
                                                     "response.in_progress", "content_block_stop", "message_start"):
            continue  # repeats of text already streamed as deltas
        signature(j, acc)
    return closed, "".join(acc)


class Stats:
    def __init__(self):
        self.mu = threading.Lock()
        self.counts = {}
        self.lat = []     # (t, kind, seconds)
        self.bad = []

    def add(self, kind, outcome, t0=None):
        with self.mu:
            self.counts[(kind, outcome)] = self.counts.get((kind, outcome), 0) + 1
            if t0 is not None:
                self.lat.append((t0, kind, time.time() - t0))

    def fail(self, msg):
        with self.mu:
            if len(self.bad) < 50:
                self.bad.append(msg)


def post(port, path, body, timeout, raw=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"content-type": "application/json"}
        h.update(headers or {})
        c.request("POST", path, raw if raw is not None else json.dumps(body), h)
        r = c.getresponse()
        data, deadline = b"", time.time() + timeout
        while True:
            x = r.read1(65536)
            if not x:
                break
            data += x
            if time.time() > deadline:
                raise TimeoutError("no end within %ds" % timeout)
        return r.status, data, r.getheader("Retry-After")
    finally:
        c.close()


def run_greedy(port, item, solo, st, timeout):
    name, path, body = item
    kind = name.rsplit("-", 1)[0]
    t0 = time.time()
    try:
        code, data, ra = post(port, path, body, timeout)
    except TimeoutError:
        st.add(kind, "HANG")
        st.fail("%s: no answer within %ds" % (name, timeout))
        return
    except (OSError, http.client.HTTPException) as e:
        st.add(kind, "conn-error")
        st.fail("%s: %s" % (name, e))
        return
    if code == 429:
        st.add(kind, "429")
        if not ra:
            st.fail("%s: 429 without Retry-After" % name)
        return
    if code != 200:
        st.add(kind, "http-%d" % code)
        st.fail("%s: HTTP %d %s" % (name, code, data[:200]))
        return
    ok, sig = answer(data, body.get("stream"))
    if not ok or sig != solo[name]:
        st.add(kind, "WRONG")
        st.fail("%s: answer differs from solo:\n  got  %r\n  solo %r" % (name, sig[:300], solo[name][:300]))
        return
    st.add(kind, "ok", t0)


def run_cancel(port, items, st, stall):
    """a stream read for its first bytes and then dropped, or stalled for `stall` s before reading on"""
    name, path, body = random.choice([i for i in items if i[2].get("stream")])
    kind = "cancel" if not stall else "slow-reader"
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("POST", path, json.dumps(body), {"content-type": "application/json"})
        r = c.getresponse()
        if r.status == 429:
            st.add(kind, "429")
            return
        r.read1(64)
        if stall:
            time.sleep(stall)
            while r.read1(65536):
                pass
        st.add(kind, "ok")
    except (OSError, http.client.HTTPException) as e:
        st.add(kind, "conn-error")
        st.fail("%s: %s" % (kind, e))
    finally:
        c.close()


def run_bad(port, st, max_body):
    kind = random.choice(["malformed", "oversized", "wrong-type"])
    try:
        if kind == "malformed":
            code, data, _ = post(port, "/v1/chat/completions", None, 30, raw='{"model": "m", "messages": [')
            want = 400
        elif kind == "oversized":
            code, data, _ = post(port, "/v1/chat/completions", None, 30,
                                 raw='{"model":"m","messages":[{"role":"user","content":"%s"}]}' % ("x" * (max_body + 10)))
            want = 413
        else:
            code, data, _ = post(port, "/v1/chat/completions", {"model": "m", "messages": "not a list"}, 30)
            want = 400
    except (OSError, http.client.HTTPException) as e:
        st.add(kind, "conn-error")
        if kind != "oversized":  # a server may close an oversized upload early
            st.fail("%s: %s" % (kind, e))
        return
    st.add(kind, "ok" if code == want else "http-%d" % code)
    if code != want:
        st.fail("%s: HTTP %d, expected %d: %s" % (kind, code, want, data[:200]))


def run_burst(port, items, solo, st, n, timeout):
    ths = [threading.Thread(target=run_greedy, args=(port, random.choice(items), solo, st, timeout)) for _ in range(n)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()


def run_unique(port, st, rng, timeout):
    """a greedy chat request with a long prompt never sent before: it has no solo answer to compare
    with, but it misses the prefix cache and leaves a new checkpoint there, so the cache keeps filling
    and evicting under its --cache-ram budget"""
    words = ["alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "x", "y", "z", "return", "def", "(", ")"]
    text = " ".join(rng.choice(words) for _ in range(rng.randint(60, 250)))
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 4, "temperature": 0}
    try:
        code, data, ra = post(port, "/v1/chat/completions", body, timeout)
    except (OSError, http.client.HTTPException, TimeoutError) as e:
        st.add("unique", "conn-error")
        st.fail("unique: %s" % e)
        return
    if code == 429:
        st.add("unique", "429")
        return
    ok = code == 200 and answer(data, False)[0]
    st.add("unique", "ok" if ok else "http-%d" % code)
    if not ok:
        st.fail("unique: HTTP %d %s" % (code, data[:200]))


CACHE_RE = re.compile(r'^(mtplx_prefix_cache_(?:bytes\{tier="(ram|kv)"\}|budget_bytes|entries|evictions_total|hits_total|lookups_total))'
                      r' (\S+)$', re.M)


def cache_sample(port):
    """the prefix cache's gauges from /metrics: {ram, kv, budget, entries, evictions, hits, lookups}
    (bytes and counts), or None when the server has no prefix cache"""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode("utf-8", "replace")
    finally:
        c.close()
    out = {}
    for name, tier, v in CACHE_RE.findall(text):
        key = tier or name.split("mtplx_prefix_cache_")[1].replace("_total", "").replace("_bytes", "")
        out[key] = float(v)
    return out if "ram" in out and "budget" in out else None


def proc_sample(pid):
    with open("/proc/%d/status" % pid) as f:
        s = f.read()
    rss = int(re.search(r"VmRSS:\s+(\d+)", s).group(1)) // 1024
    thr = int(re.search(r"Threads:\s+(\d+)", s).group(1))
    return rss, len(os.listdir("/proc/%d/fd" % pid)), thr


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, required=True, help="seconds of load")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "mtplx"))
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=len(PROMPTS), help="distinct prompts (10 request bodies each)")
    ap.add_argument("--max-queue", type=int, default=6)
    ap.add_argument("--burst", type=int, default=10, help="concurrent requests of one burst (> --max-queue)")
    ap.add_argument("--sample", type=float, default=5.0)
    ap.add_argument("--rss-slack", type=float, default=64.0, help="MiB of RSS growth allowed after warm-up")
    ap.add_argument("--cache-ram", type=int, default=8, help="the server's --cache-ram (MiB)")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--json", help="write the report's numbers here")
    args = ap.parse_args()
    random.seed(args.seed)
    max_body = 65536
    tmp = tempfile.mkdtemp(prefix="mtplx-soak-")
    # ASan keeps freed memory in a quarantine of up to 256 MiB, which would read as RSS growth: a
    # small one keeps RSS a measure of what the server holds
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:quarantine_size_mb=8",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    env.pop("MTPLX_API_KEY", None)
    out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
    p = subprocess.Popen([args.bin, "serve", "--host", "127.0.0.1", "--port", "0", "--quiet", "--max-queue", str(args.max_queue),
                          "--max-body", str(max_body), "--ctx", "512",
                          # a small prefix cache fills during warm-up, so its bound is what the RSS
                          # check sees (a 1 GiB default would still be growing: docs/prefix-cache.md)
                          "--cache-ram", str(args.cache_ram)], env=env, stdout=open(out, "w"), stderr=open(err, "w"))
    port = None
    for _ in range(1200):
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", open(out).read())
        if m:
            port = int(m.group(1))
            break
        if p.poll() is not None:
            break
        time.sleep(0.1)
    if not port:
        p.kill()
        raise SystemExit("server did not start: " + open(err).read()[-2000:])
    st = Stats()
    items = bodies(args.prompts)
    solo = {}
    t_solo = time.time()
    for name, path, body in items:  # the solo answers, one request at a time
        code, data, _ = post(port, path, body, args.timeout)
        ok, sig = answer(data, body.get("stream")) if code == 200 else (False, "")
        if not ok:
            p.kill()
            raise SystemExit("solo %s failed: HTTP %d %s" % (name, code, data[:300]))
        solo[name] = sig
    print("solo answers: %d requests in %.0f s" % (len(items), time.time() - t_solo), flush=True)
    samples = []  # (t, rss MiB, fds, threads)
    csamples = []  # (t, cache_sample dict)
    start = time.time()
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            try:
                samples.append((time.time() - start,) + proc_sample(p.pid))
            except (OSError, AttributeError):
                pass
            try:
                cs = cache_sample(port)
                if cs:
                    csamples.append((time.time() - start, cs))
            except (OSError, http.client.HTTPException):
                pass
            stop.wait(args.sample)

    def client(ci):
        rng = random.Random(args.seed * 1000 + ci)
        while time.time() - start < args.duration and p.poll() is None:
            r = rng.random()
            if r < 0.08:
                run_unique(port, st, rng, args.timeout)
            elif r < 0.70:
                run_greedy(port, rng.choice(items), solo, st, args.timeout)
            elif r < 0.78:
                run_cancel(port, items, st, 0)
            elif r < 0.82:
                run_cancel(port, items, st, rng.uniform(2, 6))
            elif r < 0.93:
                run_bad(port, st, max_body)
            else:
                run_burst(port, items, solo, st, args.burst, args.timeout)

    ts = threading.Thread(target=sampler, daemon=True)
    ts.start()
    cl = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in cl:
        t.start()
    for t in cl:
        t.join()
    time.sleep(2)  # idle: connections and threads of the load should be gone
    stop.set()
    ts.join()
    try:
        idle = proc_sample(p.pid)
    except OSError:
        idle = None
    elapsed = time.time() - start
    dead = p.poll() is not None
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(120)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = "hang"
    log = open(err, errors="replace").read()
    shutil.rmtree(tmp, ignore_errors=True)

    # ---- report ----
    bad = list(st.bad)
    if dead:
        bad.append("the server died during the load")
    if rc != 0:
        bad.append("exit status %s after SIGTERM" % rc)
    if SAN_RE.search(log):
        bad.append("sanitizer report: " + log[SAN_RE.search(log).start():][:2000])
    q = [s for s in samples if s[0] >= elapsed / 4] or samples
    warm = q[0] if q else None
    if warm and samples:
        peak_after = max(s[1] for s in q)
        if peak_after > warm[1] + args.rss_slack:
            bad.append("RSS grew from %d MiB (end of warm-up) to %d MiB" % (warm[1], peak_after))
    base = samples[0] if samples else None
    if idle and base and (idle[1] > base[2] + 2 or idle[2] > base[3] + 2):
        bad.append("once idle: %d fds, %d threads (at the start %d, %d)" % (idle[1], idle[2], base[2], base[3]))
    total = sum(v for (k, o), v in st.counts.items())
    served = sum(v for (k, o), v in st.counts.items() if o == "ok")
    print("\n## soak: %s, %.0f s, %d clients, seed %d\n" % (os.path.relpath(args.bin, ROOT), elapsed, args.clients, args.seed))
    print("requests: %d (%d ok), %.2f / s\n" % (total, served, total / max(elapsed, 1)))
    kinds = sorted({k for k, _ in st.counts})
    outs = sorted({o for _, o in st.counts})
    print("| kind | " + " | ".join(outs) + " |")
    print("|---|" + "---|" * len(outs))
    for k in kinds:
        print("| %s | %s |" % (k, " | ".join(str(st.counts.get((k, o), 0)) for o in outs)))
    nwin = max(1, min(10, int(elapsed // 30) or 1))
    w = elapsed / nwin
    print("\n| window (s) | greedy answers | p50 latency (s) | p99 latency (s) | RSS MiB (max) | fds (max) | threads (max) |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for i in range(nwin):
        a, b = i * w, (i + 1) * w
        ls = [x for t0, k, x in st.lat if a <= t0 - start < b]
        ss = [s for s in samples if a <= s[0] < b]
        row = (a, b, len(ls), pct(ls, 0.5), pct(ls, 0.99), max((s[1] for s in ss), default=0), max((s[2] for s in ss), default=0),
               max((s[3] for s in ss), default=0))
        rows.append(row)
        print("| %.0f-%.0f | %d | %.2f | %.2f | %d | %d | %d |" % row)
    cache = None
    if csamples:
        budget = csamples[-1][1]["budget"]
        over = [(t, c["ram"]) for t, c in csamples if c["ram"] > budget]
        if over:
            bad.append("prefix cache RAM %.1f MiB above its budget %.1f MiB at %.0f s" % (over[0][1] / 2**20, budget / 2**20, over[0][0]))
        last = csamples[-1][1]
        cache = {"budget_mib": budget / 2**20, "ram_max_mib": max(c["ram"] for _, c in csamples) / 2**20,
                 "kv_max_mib": max(c.get("kv", 0) for _, c in csamples) / 2**20,
                 "entries_max": max(c.get("entries", 0) for _, c in csamples), "evictions": last.get("evictions", 0),
                 "hits": last.get("hits", 0), "lookups": last.get("lookups", 0), "samples": len(csamples)}
        print("\nprefix cache (/metrics, %d samples): RAM held %.1f MiB at most of a %.1f MiB budget (--cache-ram); "
              "KV pages referenced %.1f MiB at most; up to %d checkpoints, %d evictions, %d hits of %d lookups"
              % (cache["samples"], cache["ram_max_mib"], cache["budget_mib"], cache["kv_max_mib"], cache["entries_max"],
                 cache["evictions"], cache["hits"], cache["lookups"]))
        print("\n| window (s) | cache RAM MiB (max) | cache KV MiB (max) | checkpoints (max) | evictions (end) |")
        print("|---|---|---|---|---|")
        for i in range(nwin):
            a, b = i * w, (i + 1) * w
            cs = [c for t, c in csamples if a <= t < b]
            if cs:
                print("| %.0f-%.0f | %.1f | %.1f | %d | %d |" % (a, b, max(c["ram"] for c in cs) / 2**20,
                      max(c.get("kv", 0) for c in cs) / 2**20, max(c.get("entries", 0) for c in cs), cs[-1].get("evictions", 0)))
    if idle:
        print("\nidle after the load: RSS %d MiB, %d fds, %d threads" % idle)
    for b in bad:
        print("BAD: " + b)
    rep = {"seconds": elapsed, "requests": total, "ok": served, "counts": {"%s/%s" % k: v for k, v in st.counts.items()},
           "windows": rows, "samples": samples, "idle": idle, "cache": cache, "bad": bad}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rep, f)
    print("soak: %s" % ("FAILED" if bad else "ok"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
