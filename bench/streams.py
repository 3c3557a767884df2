#!/usr/bin/env python3
"""streams.py - bench/streams.mjs for machines without node (the GPU machine): aggregate decode speed
and latency of N concurrent streams through `mtplx serve`, Python standard library only.

Usage (repo root):
  python3 bench/streams.py BASE_URL [--streams 1,8,64] [--max-tokens 256] [--depth N]
                           [--rounds R] [--long-prompt TOKENS [--long-delay S]] [--json]

Same measurement as streams.mjs (docs/architecture.md "The scheduler"): each round starts N streaming
/v1/completions at once (T 0.6, top_p 0.95, top_k 20, distinct code prompts cut from this repo's C
sources, fixed seeds), one thread per stream. Per stream: time to the first token and the gaps between
deliveries (server events less than 1 ms apart are one delivery: an MTP cycle commits several tokens
at once). Aggregate tok/s = completion tokens of all streams / wall time of the round. With
--long-prompt T, one more request with a ~T-token prompt joins --long-delay seconds (default 0.3) after
the others started, and the others' longest gap while it is read (from its start to its first token)
is reported against their median gap, as streams.mjs does (issue 12's chunked-prefill bar: <= 5x).
"""
import argparse
import http.client
import json
import threading
import time
import urllib.parse


def pct(values, p):
    """The p-quantile (nearest rank, as streams.mjs) of values, NaN when empty."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))]


def load_source():
    files = ["src/engine/sched.c", "src/model/forward.c", "src/engine/cycle.c", "src/server/queue.c"]
    return "\n".join(open(f, encoding="utf-8").read() for f in files)


def prompt(src, i):
    at = (i * 997) % (len(src) - 2000)
    return src[at:at + 600]


def stream(url, body, out):
    """Runs one streaming completion; fills out with t0, ttft, end, tokens, deliveries (seconds)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", json.dumps(body),
                 {"Content-Type": "application/json", "Authorization": "Bearer x"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
    arrivals, tokens = [], 0
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        t = time.perf_counter()
        ch = ev.get("choices") or []
        if ch and ch[0].get("text"):
            arrivals.append(t)
        if ev.get("usage"):
            tokens = ev["usage"]["completion_tokens"]
    conn.close()
    deliveries = [t for k, t in enumerate(arrivals) if k == 0 or t - arrivals[k - 1] >= 1e-3]
    out.update(t0=t0, ttft=(deliveries[0] - t0) if deliveries else float("nan"),
               end=arrivals[-1] if arrivals else time.perf_counter(), tokens=tokens,
               gaps=[b - a for a, b in zip(deliveries, deliveries[1:])], deliveries=len(deliveries),
               arrivals=deliveries)


def run_round(args, src, n, r):
    """One round of n concurrent streams; returns its summary row (times in ms, rates per second)."""
    results = [dict() for _ in range(n)]
    threads = []
    t0 = time.perf_counter()
    for i in range(n):
        body = {"model": "m", "prompt": prompt(src, i + 31 * r), "max_tokens": args.max_tokens,
                "temperature": 0.6, "top_p": 0.95, "top_k": 20, "seed": 1000 + i, "stream": True,
                "stream_options": {"include_usage": True}}
        if args.depth is not None:
            body["mtplx"] = {"depth": args.depth}
        th = threading.Thread(target=stream, args=(args.url, body, results[i]))
        th.start()
        threads.append(th)
    long = {}
    if args.long_prompt:
        time.sleep(args.long_delay)  # the others are decoding by now
        body = {"model": "m", "prompt": (src * 4)[:args.long_prompt * 4], "max_tokens": 16, "temperature": 0.6,
                "top_p": 0.95, "top_k": 20, "seed": 7, "stream": True, "stream_options": {"include_usage": True}}
        th = threading.Thread(target=stream, args=(args.url, body, long))
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    if any("tokens" not in x for x in results) or (args.long_prompt and "tokens" not in long):
        raise RuntimeError("a stream failed (see the traceback above)")
    wall = max(x["end"] for x in results) - t0
    tokens = sum(x["tokens"] for x in results)
    first = min(x["t0"] + x["ttft"] for x in results)
    last = max(x["end"] for x in results)
    gaps = [g * 1e3 for x in results for g in x["gaps"]]
    ttfts = [x["ttft"] * 1e3 for x in results]
    row = {"streams": n, "round": r, "wall_s": wall, "tokens": tokens, "agg_tok_s": tokens / wall,
           "decode_tok_s": tokens / (last - first), "ttft_p50": pct(ttfts, 0.5),
           "ttft_p99": pct(ttfts, 0.99), "gap_p50": pct(gaps, 0.5), "gap_p99": pct(gaps, 0.99),
           "tok_per_chunk": tokens / max(1, sum(x["deliveries"] for x in results))}
    if long:  # the others' gaps that overlap the long prompt's prefill (its start to its first token)
        lo, hi = long["t0"], long["t0"] + long["ttft"]
        during = [(a[k] - a[k - 1]) * 1e3 for x in results for a in [x["arrivals"]] for k in range(1, len(a))
                  if a[k] > lo and a[k - 1] < hi]
        worst = max(during) if during else float("nan")
        row["long_prompt"] = {"ttft_ms": long["ttft"] * 1e3, "max_gap_during_ms": worst,
                              "gaps_during": len(during), "median_gap_ms": row["gap_p50"],
                              "ratio": worst / row["gap_p50"]}
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url")
    ap.add_argument("--streams", default="1,2,4,8,16")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--depth", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--long-prompt", type=int, default=0)
    ap.add_argument("--long-delay", type=float, default=0.3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    src = load_source()
    rows = [run_round(args, src, int(n), r) for n in args.streams.split(",") for r in range(args.rounds)]
    if args.json:
        print(json.dumps(rows))
        return
    print("| streams | tokens | wall s | aggregate tok/s | decode tok/s | TTFT p50 / p99 ms "
          "| delivery gap p50 / p99 ms | tok per delivery |")
    print("|---|---|---|---|---|---|---|---|")
    for x in rows:
        print(f"| {x['streams']} | {x['tokens']} | {x['wall_s']:.2f} | {x['agg_tok_s']:.1f} | "
              f"{x['decode_tok_s']:.1f} | {x['ttft_p50']:.0f} / {x['ttft_p99']:.0f} | "
              f"{x['gap_p50']:.1f} / {x['gap_p99']:.1f} | {x['tok_per_chunk']:.2f} |" +
              (f" long prompt: TTFT {x['long_prompt']['ttft_ms']:.0f} ms, max gap during "
               f"{x['long_prompt']['max_gap_during_ms']:.1f} ms = {x['long_prompt']['ratio']:.2f}x median "
               f"({x['long_prompt']['gaps_during']} gaps)" if "long_prompt" in x else ""))


if __name__ == "__main__":
    main()
