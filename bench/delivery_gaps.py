#!/usr/bin/env python3
"""delivery_gaps.py — where a streamed client's longest gap went, from the server's two traces.

Usage: bench/delivery_gaps.py SSE_TRACE [SCHED_TRACE] [--top N]

SSE_TRACE is the file of $MTPLX_SSE_TRACE (one line per event: t_ms kind job bytes; 'f' the worker
handed a stream's bytes to its HTTP thread, 'w' that thread gave them to the socket), SCHED_TRACE the
file of $MTPLX_SCHED_TRACE (one line per scheduler step; its header gives its time origin). For every
request the script finds its longest gap between two hand-offs and between two socket writes, and
prints the N longest with the scheduler steps that started inside that gap, so a gap a client saw can
be put on one side: no step ran (the scheduler), steps ran but nothing was handed off (the worker), or
bytes were handed off but not written (the HTTP thread / socket). Prompt-read time is excluded: a
request's gaps start at its first hand-off."""
import sys


def load_sse(path):
    ev = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        t, kind, job, n = line.split()
        ev.setdefault(int(job), []).append((float(t), kind, int(n)))
    return ev


def load_sched(path):
    steps, origin = [], 0.0
    for line in open(path):
        if line.startswith("# t_ms from clock_now() ="):
            origin = float(line.split("=")[1].split()[0])
        elif not line.startswith("#") and line.strip():
            f = line.split()
            steps.append((origin + float(f[0]), line.strip()))
    return steps


def longest(ts):
    best = (0.0, 0.0, 0.0)
    for a, b in zip(ts, ts[1:]):
        if b - a > best[0]:
            best = (b - a, a, b)
    return best


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 5
    if "--top" in sys.argv:
        args.remove(str(top))
    if not args:
        sys.exit(__doc__)
    ev = load_sse(args[0])
    steps = load_sched(args[1]) if len(args) > 1 else []
    rows = []
    for job, e in ev.items():
        f = [t for t, k, _ in e if k == "f"]
        w = [t for t, k, _ in e if k == "w"]
        gf, gw = longest(f), longest(w)
        rows.append((max(gf[0], gw[0]), job, gf, gw, len(f), len(w)))
    rows.sort(reverse=True)
    print("| job | hand-offs | longest hand-off gap ms (from) | writes | longest write gap ms (from) | steps started in the write gap |")
    print("|---|---|---|---|---|---|")
    for _, job, gf, gw, nf, nw in rows[:top]:
        inside = [s for t, s in steps if gw[1] < t < gw[2]]
        print(f"| {job} | {nf} | {gf[0]:.1f} ({gf[1]:.1f}) | {nw} | {gw[0]:.1f} ({gw[1]:.1f}) | {len(inside)} |")


if __name__ == "__main__":
    main()
