#!/usr/bin/env python3
"""sweep.py — allocation- and I/O-failure injection sweep over build/fault/mtplx (src/base/fault.h).

Each scenario is first run without a fault, with MTPLX_FAULT_TRACE, which numbers every allocation
and I/O point and names its call site (caller and caller's caller). The sweep then reruns the
scenario once per chosen point n with MTPLX_FAULT_ALLOC=n (or MTPLX_FAULT_IO=n) and classifies it:
  ok        exit 0 and the same result as the fault-free run (the fault was absorbed)
  clean     exit 1 with an error message on stderr, no sanitizer report
  WRONG     exit 0 but a result different from the fault-free run (a failure reported as success)
  CRASH     any sanitizer report (ASan, UBSan, LeakSanitizer), a signal or another exit status
  HANG      no exit within the timeout
  unfired   the point was not reached this time (counts of threaded runs vary slightly)
Server scenarios start one `serve` per API with MTPLX_FAULT_PHASE=request: every request restarts
the count and moves the failing point on by one (MTPLX_FAULT_STEP), so one server tries n = 1, 2,
... on successive requests until a request no longer reaches n; a request must then get an HTTP
error, a dropped connection, or the fault-free answer; the server must still answer /health, stop
on SIGTERM with status 0 and print no sanitizer (leak) report.

Modes: --points all (every n), --points sites (default: per call site the first --per-site
occurrences and the last), --sample K (at most K points per scenario, seeded, for the suite).
Prints one line per scenario and a summary table (markdown with --markdown); exits 1 on any
WRONG/CRASH/HANG. Usage: python3 tests/fault/sweep.py [--only NAME,...] [--jobs J] [...]
"""
import argparse
import faulthandler
import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "build", "fault", "mtplx")
SAN_RE = re.compile(r"AddressSanitizer|LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer")
ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=99",
           UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1", MTPLX_PROGRESS_DELAY="1000",
           # one thread: a thread pool that cannot be allocated falls back to serial loops
           # (src/kernels/threadpool.c), whose sums are rounded in another order than two threads'
           MTPLX_THREADS="1")
ENV.pop("MTPLX_API_KEY", None)

TEMPLATE_REQ = {
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris? \u00e9\u4e2d\U0001F600"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21}"},
        {"role": "user", "content": "Thanks"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "add_generation_prompt": True,
}


def cli_scenarios(tmp):
    """name -> (argv after the binary, output files compared besides stdout, stdout filter)"""
    req = os.path.join(tmp, "req.json")
    with open(req, "w") as f:
        json.dump(TEMPLATE_REQ, f)
    sc = {}
    fams = [("goldens", d) for d in ("deepseek_v3", "llama", "qwen3_5_dense", "qwen3_5_moe", "qwen3_dense", "qwen3_next")]
    fams += [("goldens-extra", "deepseek_v3_mtp")]
    for group, fam in fams:
        out = os.path.join(tmp, "load-%s.safetensors" % fam)
        argv = ["logits", "--model", os.path.join(ROOT, "tests", "data", group, fam), "--tokens", "1,2,3", "--out", out]
        if fam.endswith("mtp"):
            argv.append("--mtp")
        sc["load-" + fam] = (argv, [out], None)
    sc["tokenizer"] = (["tokenize", "--text", "def f(x):\n    return x**2  # \u00e9\u4e2d <|im_end|>", "--json"], [], None)
    sc["template"] = (["template", "--request", req, "--json"], [], None)

    def run_filter(stdout):  # timings differ between runs: compare the text, tokens and reason
        try:
            j = json.loads(stdout)
            return json.dumps([j.get("text"), j.get("tokens"), j.get("finish_reason")])
        except ValueError:
            return "unparsable: " + stdout
    sc["run-mtp"] = (["run", "--prompt", "def fib(n):", "--max-tokens", "6", "--temperature", "0", "--depth", "2",
                      "--seed", "1", "--json", "--quiet"], [], run_filter)
    return sc


def read_file(p):
    try:
        with open(p, "rb") as f:
            return f.read()
    except OSError:
        return None


def run_cli(argv, outs, env_extra, timeout):
    for o in outs:
        if os.path.exists(o):
            os.unlink(o)
    env = dict(ENV, **env_extra)
    try:
        p = subprocess.run([BIN] + argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, b"", b"", []
    return p.returncode, p.stdout, p.stderr, [read_file(o) for o in outs]


def parse_trace(path):
    """[(kind, n, site)] in order"""
    pts = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:
                pts.append((parts[0], int(parts[1]), " ".join(parts[2:])))
    return pts


def choose(points, mode, per_site, sample, rng):
    """the (kind, n) pairs to try"""
    if mode == "all":
        chosen = [(k, n) for k, n, _ in points]
    else:
        by_site = {}
        for k, n, site in points:
            by_site.setdefault((k, site), []).append(n)
        chosen = set()
        for (k, _), ns in by_site.items():
            for n in ns[:per_site] + ns[-1:]:
                chosen.add((k, n))
        chosen = sorted(chosen)
    if sample and len(chosen) > sample:
        chosen = sorted(rng.sample(chosen, sample))
    return chosen


def classify_cli(ref, res, filt):
    rc, out, err, files = res
    if rc is None:
        return "HANG", ""
    es = err.decode("utf-8", "replace")
    if SAN_RE.search(es) or rc not in (0, 1):
        return "CRASH", "exit %s: %s" % (rc, es[-3000:])
    fired = "mtplx-fault: fired" in es
    if rc == 0:
        same = (filt(out.decode("utf-8", "replace")) if filt else out) == ref[0] and files == ref[1]
        if not same:
            return "WRONG", "exit 0, result differs (%s)" % es[-500:]
        return ("ok" if fired else "unfired"), ""
    msg = [l for l in es.splitlines() if l and not l.startswith("mtplx-fault:")]
    if not msg:
        return "CRASH", "exit 1 without a message"
    return ("clean" if fired else "CRASH"), msg[-1]


def sweep_cli(name, spec, args, rng, log):
    argv, outs, filt = spec
    trace = os.path.join(args.tmp, name + ".trace")
    rc, out, err, files = run_cli(argv, outs, {"MTPLX_FAULT_TRACE": trace}, args.timeout)
    if rc != 0:
        raise SystemExit("%s: the fault-free run failed (exit %s): %s" % (name, rc, err.decode()[-2000:]))
    ref = ((filt(out.decode()) if filt else out), files)
    points = parse_trace(trace)
    todo = choose(points, args.points, args.per_site, args.sample, rng)
    counts = {}
    import concurrent.futures as cf

    # outputs are per-scenario files: parallel runs need their own copies
    def one_par(kn):
        kind, n = kn
        var = "MTPLX_FAULT_ALLOC" if kind == "alloc" else "MTPLX_FAULT_IO"
        sub = tempfile.mkdtemp(dir=args.tmp)
        o2 = [os.path.join(sub, os.path.basename(o)) for o in outs]
        a2 = [o2[outs.index(a)] if a in outs else a for a in argv]
        res = run_cli(a2, o2, {var: str(n), "MTPLX_FAULT_REPORT": "1"}, args.timeout)
        shutil.rmtree(sub, ignore_errors=True)
        if outs:  # "wrote PATH" names the run's own copy
            res = (res[0], res[1].replace(sub.encode(), os.path.dirname(outs[0]).encode()), res[2], res[3])
        return kn, res

    with cf.ThreadPoolExecutor(args.jobs) as ex:
        for (kind, n), res in ex.map(one_par, todo):
            verdict, detail = classify_cli(ref, res, filt)
            counts[verdict] = counts.get(verdict, 0) + 1
            if verdict in ("WRONG", "CRASH", "HANG"):
                log.append("%s %s #%d: %s %s" % (name, kind, n, verdict, detail))
    total_alloc = sum(1 for p in points if p[0] == "alloc")
    total_io = sum(1 for p in points if p[0] == "io")
    sites = len({(k, s) for k, _, s in points})
    return {"points": "%d alloc + %d io (%d sites)" % (total_alloc, total_io, sites), "tried": len(todo), **counts}


# ---- server scenarios ----

API = {
    "chat": ("/v1/chat/completions", {"model": "x", "messages": [{"role": "user", "content": "def f("}], "max_tokens": 6, "temperature": 0}),
    "chat-stream": ("/v1/chat/completions", {"model": "x", "messages": [{"role": "user", "content": "def f("}], "max_tokens": 6, "temperature": 0, "stream": True}),
    "messages-stream": ("/v1/messages", {"model": "x", "messages": [{"role": "user", "content": "def f("}], "max_tokens": 6, "temperature": 0, "stream": True}),
    "responses-stream": ("/v1/responses", {"model": "x", "input": "def f(", "max_output_tokens": 6, "temperature": 0, "stream": True}),
    "completions": ("/v1/completions", {"model": "x", "prompt": "def f(", "max_tokens": 6, "temperature": 0}),
    "responses": ("/v1/responses", {"model": "x", "input": "def f(", "max_output_tokens": 6, "temperature": 0}),
    "messages": ("/v1/messages", {"model": "x", "messages": [{"role": "user", "content": "def f("}], "max_tokens": 6, "temperature": 0}),
    "chat-tools": ("/v1/chat/completions", {"model": "x", "messages": TEMPLATE_REQ["messages"], "tools": TEMPLATE_REQ["tools"], "max_tokens": 6, "temperature": 0}),
}
VOLATILE = {"id", "item_id", "created", "created_at", "mtplx", "system_fingerprint"}


# how much of the prompt the prefix cache served depends on the requests before (docs/prefix-cache.md):
# compare the whole prompt count (Anthropic's input_tokens counts only the uncached part)
CACHE_FIELDS = {"cache_read_input_tokens", "cache_creation_input_tokens", "prompt_tokens_details",
                "input_tokens_details"}


def normalize(v):
    if isinstance(v, dict):
        v = dict(v)
        if isinstance(v.get("input_tokens"), int) and isinstance(v.get("cache_read_input_tokens"), int):
            v["input_tokens"] += v["cache_read_input_tokens"]
        return {k: normalize(x) for k, x in v.items() if k not in VOLATILE and k not in CACHE_FIELDS}
    if isinstance(v, list):
        return [normalize(x) for x in v]
    return v


def sse_content(body):
    """the stream's data frames, normalised; ('error', text) when it carries an error"""
    frames = []
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith("data: "):
            d = line[6:]
            if d == "[DONE]":
                frames.append("[DONE]")
                continue
            try:
                j = json.loads(d)
            except ValueError:
                return ("bad-frame", d)
            if isinstance(j, dict) and ("error" in j and j["error"] or j.get("type") in ("error", "response.failed")):
                return ("error", d)
            frames.append(normalize(j))
    return frames


def request(port, path, body, timeout):
    """(status, result) — status None for a dropped connection, 'HANG' for a timeout"""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", path, json.dumps(body), {"content-type": "application/json"})
        r = c.getresponse()
        data, deadline = b"", time.time() + timeout  # a wall-clock bound: keep-alive frames reset socket timeouts
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            data += chunk
            if time.time() > deadline:
                return "HANG", None
        if r.status != 200:
            return r.status, data
        if body.get("stream"):
            return 200, sse_content(data)
        return 200, normalize(json.loads(data))
    except TimeoutError:
        return "HANG", None
    except (ConnectionError, http.client.HTTPException, ValueError) as e:
        return None, str(e)
    finally:
        c.close()


def start_server(tmp, name, env_extra):
    out, err = os.path.join(tmp, name + ".out"), os.path.join(tmp, name + ".err")
    p = subprocess.Popen([BIN, "serve", "--host", "127.0.0.1", "--port", "0", "--quiet", "--ctx", "256"],
                         env=dict(ENV, **env_extra), stdout=open(out, "w"), stderr=open(err, "w"))
    for _ in range(1200):
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", open(out).read())
        if m:
            return p, int(m.group(1)), err
        if p.poll() is not None:
            raise SystemExit("%s: server exited early: %s" % (name, open(err).read()[-2000:]))
        time.sleep(0.1)
    p.kill()
    raise SystemExit("%s: server did not start" % name)


def stop_server(p, err_path, timeout):
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return "HANG", "no exit within %ds of SIGTERM" % timeout
    es = open(err_path).read()
    if rc != 0 or SAN_RE.search(es):
        return "CRASH", "exit %s: %s" % (rc, es[-4000:])
    return "ok", ""


def sweep_server(name, api, args, rng, log):
    path, body = API[api]
    # the fault-free answer, from a server without faults
    p, port, errp = start_server(args.tmp, name + "-ref", {})
    st, ref = request(port, path, body, args.timeout)
    v, d = stop_server(p, errp, args.timeout)
    if st != 200 or v != "ok":
        raise SystemExit("%s: the fault-free request failed: %s %s %s" % (name, st, ref, d))
    counts = {}
    for kind, var in (("alloc", "MTPLX_FAULT_ALLOC"), ("io", "MTPLX_FAULT_IO")):
        start = 1
        step = 1
        if args.sample:  # the suite: a sampled stride over the points, from a random start
            step = max(1, args.stride)
            start = rng.randint(1, step)
        p, port, errp = start_server(args.tmp, "%s-%s" % (name, kind), {
            "MTPLX_FAULT_PHASE": "request", var: str(start), "MTPLX_FAULT_STEP": str(step), "MTPLX_FAULT_REPORT": "1"})
        n, tried, seen, misses = start, 0, 0, 0
        while True:
            before = os.path.getsize(errp)
            st, res = request(port, path, body, args.timeout)
            time.sleep(0.02)  # the worker's last log lines
            with open(errp) as f:
                f.seek(before)
                new = f.read()
            fired = "mtplx-fault: fired" in new
            tried += 1
            if st == "HANG":
                verdict, detail = "HANG", "request timed out"
            elif p.poll() is not None:
                verdict, detail = "CRASH", "server died: " + open(errp).read()[-3000:]
            elif SAN_RE.search(new):
                verdict, detail = "CRASH", new[-3000:]
            elif st == 200:
                if res == ref:
                    verdict, detail = ("ok" if fired else "unfired"), ""
                elif isinstance(res, tuple) and res[0] == "error" and fired:
                    verdict, detail = "clean", res[1][:200]
                else:
                    verdict, detail = "WRONG", "200 with %s%s" % (str(res)[:300], "" if fired else " (no fault fired)")
            elif st is None:
                verdict, detail = ("dropped" if fired else "CRASH"), str(res)
            else:
                verdict, detail = ("clean" if fired and st >= 400 else "WRONG"), "HTTP %s %s" % (st, res[:200])
            counts[verdict] = counts.get(verdict, 0) + 1
            if args.verbose:
                print("  %s %s #%d: %s %s" % (name, kind, n, verdict, detail[:200]), flush=True)
            if verdict in ("WRONG", "CRASH", "HANG"):
                log.append("%s %s #%d: %s %s" % (name, kind, n, verdict, detail))
                if verdict != "WRONG":
                    break
            if verdict == "unfired" or (verdict == "WRONG" and not fired):
                misses += 1
                if misses >= 3:
                    break
            else:
                misses = 0
            if args.sample and tried >= args.sample:
                break
            n += step
        if p.poll() is None:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=args.timeout)
            try:
                c.request("GET", "/health")
                if c.getresponse().status != 200:
                    log.append("%s %s: /health failed after the sweep" % (name, kind))
                    counts["CRASH"] = counts.get("CRASH", 0) + 1
            except (OSError, http.client.HTTPException) as e:
                log.append("%s %s: /health failed after the sweep: %s" % (name, kind, e))
                counts["CRASH"] = counts.get("CRASH", 0) + 1
            finally:
                c.close()
            v, d = stop_server(p, errp, args.timeout)
            if v != "ok":
                log.append("%s %s shutdown: %s %s" % (name, kind, v, d))
                counts[v] = counts.get(v, 0) + 1
        counts["tried_" + kind] = tried
    return {"points": "per request, step %d" % (max(1, args.stride) if args.sample else 1),
            "tried": counts.pop("tried_alloc", 0) + counts.pop("tried_io", 0), **counts}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated scenario names (default: all)")
    ap.add_argument("--points", choices=("sites", "all"), default="sites")
    ap.add_argument("--per-site", type=int, default=2)
    ap.add_argument("--sample", type=int, default=0, help="at most K points per scenario (0 = no limit)")
    ap.add_argument("--stride", type=int, default=25, help="server scenarios with --sample: n moves by this much")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="one line per server request")
    args = ap.parse_args()
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 prints where a stuck sweep waits
    if not os.access(BIN, os.X_OK):
        raise SystemExit("build/fault/mtplx is missing: make fault")
    rng = random.Random(args.seed)
    args.tmp = tempfile.mkdtemp(prefix="mtplx-fault-")
    log, rows = [], []
    try:
        names = cli_scenarios(args.tmp)
        only = [s for s in args.only.split(",") if s]
        allnames = list(names) + ["server-" + a for a in API]
        for name in allnames:
            if only and name not in only:
                continue
            t0 = time.time()
            if name.startswith("server-"):
                r = sweep_server(name, name[7:], args, rng, log)
            else:
                r = sweep_cli(name, names[name], args, rng, log)
            r["s"] = round(time.time() - t0)
            rows.append((name, r))
            print("%-22s %s" % (name, " ".join("%s=%s" % kv for kv in r.items())), flush=True)
    finally:
        shutil.rmtree(args.tmp, ignore_errors=True)
    if args.markdown:
        print("\n| scenario | failure points | tried | ok (absorbed) | clean error | dropped | unfired | WRONG | CRASH | HANG |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, r in rows:
            print("| %s | %s | %d | %s |" % (name, r["points"], r["tried"], " | ".join(
                str(r.get(k, 0)) for k in ("ok", "clean", "dropped", "unfired", "WRONG", "CRASH", "HANG"))))
    bad = [l for l in log]
    for l in bad:
        print("BUG: " + l)
    print("seed %d: %d scenarios, %d bad" % (args.seed, len(rows), len(bad)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
