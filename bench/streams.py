#!/usr/bin/env python3
"""streams.py - bench/streams.mjs for machines without node (the GPU machine): aggregate decode speed
and latency of N concurrent streams through `mtplx serve`, Python standard library only.

Usage (repo root):
  python3 bench/streams.py BASE_URL [--streams 1,8,64] [--max-tokens 256] [--depth N]
                           [--rounds R] [--warmup W] [--long-prompt TOKENS [--long-delay S]]
                           [--closed-loop S [--closed-warmup S]] [--json]

Same measurement as streams.mjs (docs/architecture.md "The scheduler"): each round starts N streaming
/v1/completions at once (T 0.6, top_p 0.95, top_k 20, distinct code prompts cut from this repo's C
sources, fixed seeds), all read by one thread (a selector loop over plain sockets, HTTP/1.1 chunked
responses decoded here): an event is timed when its bytes are received. Per stream: time to the first
token and the gaps between deliveries (server events less than 0.2 ms apart are one delivery: an MTP
cycle commits several tokens at once, sent 5-12 us apart, while a whole cycle takes 0.3 ms and more;
the old 1 ms merged a GPU stream's 0.95 ms cycles into false bursts, bench/batching.md "Session 20"). One thread per stream, as before, lost up to tens of ms per
gap to the threads' turns on a busy host where the server's own trace showed no such gap
(bench/batching.md "Session 13"). Aggregate tok/s = completion tokens of all streams / wall time of the round. With
--long-prompt T, one more request with a ~T-token prompt (a new first line each round, so a prefix cache
does not hold it) joins --long-delay seconds (default 0.3) after the others started, and the others' longest gap while it is read (from its start to its first token)
is reported against their median gap, as streams.mjs does (issue 12's chunked-prefill bar: <= 5x).
--warmup W runs W unreported rounds per stream count first; after the table, each stream count's mean
aggregate over its R rounds and its ratio to the first count's (issue 12's 8 streams vs one).

A round starts its N streams together and ends with the last one, so its aggregate includes the first
tokens' wait and a tail in which the streams that drew fewer tokens a cycle finish alone. --closed-loop S
measures N concurrent streams in steady state instead: N requests are kept in flight (the next starts as
one ends) and the completion tokens that arrive in an S-second window after --closed-warmup seconds
(default 1) are counted; a row's "wall s" is then S, and TTFT / gaps are those of the window.
"""
import argparse
import itertools
import json
import selectors
import socket
import time
import urllib.parse

LONG_ROUNDS = itertools.count()  # rounds that sent a long prompt (its first line)
MERGE_S = 0.2e-3  # events closer than this are one delivery (the docstring says why)


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


class Stream:
    """One streaming completion on its own socket, read by the caller's selector loop; fills out with
    t0, ttft, end, tokens, gaps, deliveries, arrivals (seconds) when the response ends."""

    def __init__(self, url, body, out):
        u = urllib.parse.urlparse(url)
        self.out, self.raw, self.text = out, b"", ""
        self.head, self.done, self.arrivals, self.tokens = False, False, [], 0
        self.t0 = time.perf_counter()
        data = json.dumps(body).encode()
        self.sock = socket.create_connection((u.hostname, u.port))
        self.sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                          b"Authorization: Bearer x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
                          % (u.hostname.encode(), len(data)) + data)
        self.sock.setblocking(False)

    def feed(self, data, t):
        """Takes bytes received at time t (b"" at the end of the connection); returns True when the
        response has ended."""
        if not data:
            self.lines(t, self.text + "\n")
            return self.finish()
        self.raw += data
        if not self.head:
            end = self.raw.find(b"\r\n\r\n")
            if end < 0:
                return False
            head, self.raw = self.raw[:end].decode("latin-1"), self.raw[end + 4:]
            status = head.split("\r\n")[0]
            if " 200 " not in status + " ":
                raise RuntimeError(f"{status}: {self.raw[:300]!r}")
            if "chunked" not in head.lower():
                raise RuntimeError("expected a chunked event stream")
            self.head = True
        ended = False
        while True:  # whole chunks of the chunked body
            nl = self.raw.find(b"\r\n")
            if nl < 0:
                break
            size = int(self.raw[:nl].split(b";")[0], 16)
            if size == 0:
                ended = True
                break
            if len(self.raw) < nl + 2 + size + 2:
                break
            self.text += self.raw[nl + 2:nl + 2 + size].decode("utf-8", "replace")
            self.raw = self.raw[nl + 2 + size + 2:]
        *lines, self.text = self.text.split("\n")
        self.lines(t, "\n".join(lines))
        return self.finish() if ended else False

    def lines(self, t, text):
        """The SSE lines in text, received at time t."""
        for line in text.split("\n"):
            line = line.strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            ch = ev.get("choices") or []
            if ch and ch[0].get("text"):
                self.arrivals.append(t)
            if ev.get("usage"):
                self.tokens = ev["usage"]["completion_tokens"]

    def finish(self):
        """Records the stream's figures in out; returns True (the caller closes the socket)."""
        self.done = True
        a = self.arrivals
        deliveries = [t for k, t in enumerate(a) if k == 0 or t - a[k - 1] >= MERGE_S]
        self.out.update(events=list(a), t0=self.t0, ttft=(deliveries[0] - self.t0) if deliveries else float("nan"),
                        end=a[-1] if a else time.perf_counter(), tokens=self.tokens,
                        gaps=[y - x for x, y in zip(deliveries, deliveries[1:])], deliveries=len(deliveries),
                        arrivals=deliveries)
        return True


def run_streams(starts, on_end=None):
    """Runs streams to their ends in one selector loop; starts: (start time, url, body, out), the start
    time a perf_counter() value (a stream is opened once it has come). on_end(now), when given, is called
    as each stream ends and returns the starts to add (the closed loop's next request)."""
    sel, pending, live = selectors.DefaultSelector(), sorted(starts, key=lambda x: x[0]), 0
    while pending or live:
        now = time.perf_counter()
        while pending and pending[0][0] <= now:
            _, url, body, out = pending.pop(0)
            st = Stream(url, body, out)
            sel.register(st.sock, selectors.EVENT_READ, st)
            live += 1
        timeout = max(0.0, pending[0][0] - time.perf_counter()) if pending else None
        for key, _ in sel.select(timeout):
            st = key.data
            try:
                data = st.sock.recv(1 << 16)
            except BlockingIOError:
                continue
            if st.feed(data, time.perf_counter()):
                sel.unregister(st.sock)
                st.sock.close()
                live -= 1
                if on_end:
                    pending = sorted(pending + on_end(time.perf_counter()), key=lambda x: x[0])


def request_body(args, src, i, seed):
    """The streaming completion of prompt i (T 0.6, top_p 0.95, top_k 20, the given seed)."""
    body = {"model": "m", "prompt": prompt(src, i), "max_tokens": args.max_tokens, "temperature": 0.6,
            "top_p": 0.95, "top_k": 20, "seed": seed, "stream": True, "stream_options": {"include_usage": True}}
    if args.depth is not None:
        body["mtplx"] = {"depth": args.depth}
    return body


def run_closed(args, src, n, r):
    """n streams kept in flight (a new request as soon as one ends) for --closed-warmup + --closed-loop
    seconds; returns the summary row of the window after the warm-up: completion tokens that arrived in
    it (each request's usage spread over its text events) per second, and the TTFT / delivery gaps of
    the requests started in it. Nothing drains inside the window, unlike a round."""
    t0 = time.perf_counter()
    lo, hi = t0 + args.closed_warmup, t0 + args.closed_warmup + args.closed_loop
    outs, count = [], [0]

    def start(now):
        out = {}
        outs.append(out)
        i = count[0]
        count[0] += 1
        return [(now, args.url, request_body(args, src, 7919 * r + i, 2000 + i), out)]

    run_streams([x for _ in range(n) for x in start(t0)], lambda now: start(now) if now < hi else [])
    if any("tokens" not in x for x in outs):
        raise RuntimeError("a stream ended without its usage event")
    tokens = sum(x["tokens"] / len(x["events"]) * sum(lo <= t < hi for t in x["events"]) for x in outs if x["events"])
    inside = [x for x in outs if lo <= x["t0"] < hi]
    gaps = [g * 1e3 for x in outs for a in [x["arrivals"]] for k, g in enumerate(x["gaps"]) if lo <= a[k] and a[k + 1] < hi]
    ttfts = [x["ttft"] * 1e3 for x in inside]
    return {"streams": n, "round": r, "wall_s": args.closed_loop, "tokens": round(tokens), "agg_tok_s": tokens / args.closed_loop,
            "decode_tok_s": tokens / args.closed_loop, "ttft_p50": pct(ttfts, 0.5), "ttft_p99": pct(ttfts, 0.99),
            "gap_p50": pct(gaps, 0.5), "gap_p99": pct(gaps, 0.99), "requests": len(outs),
            "tok_per_chunk": sum(x["tokens"] for x in outs) / max(1, sum(x["deliveries"] for x in outs))}


def run_round(args, src, n, r):
    """One round of n concurrent streams; returns its summary row (times in ms, rates per second)."""
    if args.closed_loop:
        return run_closed(args, src, n, r)
    results = [dict() for _ in range(n)]
    starts = []
    t0 = time.perf_counter()
    for i in range(n):
        starts.append((t0, args.url, request_body(args, src, i + 31 * r, 1000 + i), results[i]))
    long = {}
    if args.long_prompt:  # joins when the others are decoding
        # a new first line every round (warm-ups included), so that a prefix cache cannot serve the
        # prompt and every round reads it in chunks beside the decoding streams
        text = "# long prompt %d\n" % next(LONG_ROUNDS) + (src * 4)[:args.long_prompt * 4]
        body = {"model": "m", "prompt": text, "max_tokens": 16, "temperature": 0.6,
                "top_p": 0.95, "top_k": 20, "seed": 7, "stream": True, "stream_options": {"include_usage": True}}
        starts.append((t0 + args.long_delay, args.url, body, long))
    run_streams(starts)
    if any("tokens" not in x for x in results) or (args.long_prompt and "tokens" not in long):
        raise RuntimeError("a stream ended without its usage event")
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
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--long-prompt", type=int, default=0)
    ap.add_argument("--long-delay", type=float, default=0.3)
    ap.add_argument("--closed-loop", type=float, default=0.0)
    ap.add_argument("--closed-warmup", type=float, default=1.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.closed_loop and args.long_prompt:
        ap.error("--long-prompt measures a round's streams; it does not combine with --closed-loop")
    src = load_source()
    counts = [int(n) for n in args.streams.split(",")]
    rows = []
    for n in counts:
        for r in range(args.warmup):
            run_round(args, src, n, args.rounds + r)  # other prompts than the reported rounds'
        rows += [run_round(args, src, n, r) for r in range(args.rounds)]
    means = {n: sum(x["agg_tok_s"] for x in rows if x["streams"] == n) / args.rounds for n in counts}
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
    if args.rounds > 1 or len(counts) > 1:
        print()
        for n in counts:
            print(f"{n} stream{'s' if n > 1 else ''}: mean aggregate {means[n]:.1f} tok/s over {args.rounds} rounds"
                  f" = {means[n] / means[counts[0]]:.2f}x {counts[0]} stream{'s' if counts[0] > 1 else ''}")


if __name__ == "__main__":
    main()
