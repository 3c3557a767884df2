#!/usr/bin/env python3
"""Summarize bench/gemm.sh output: per figure, the minimum CPU time over rounds, base vs new.

usage: python3 bench/gemm_summary.py OUT   (OUT holds base.N.txt and/or new.N.txt)
Prints markdown tables: matmul ms and GFLOP/s per core (with the highest vdpbf16ps peak seen in
any round as the ceiling), then forward ms per R and prefill ms per token."""
import glob
import re
import sys

out = sys.argv[1]
best = {}   # (variant, key) -> min ms
peak = 0.0
mm = re.compile(r"\[(\d+) x (\d+)\] x(\d+) T=(\d+)\s+([\d.]+) ms .* of (\d+) \(peak")
fw = re.compile(r"(\w+) R=(\d+)\s+forward\s+([\d.]+) ms CPU .* prefill (\d+) tokens: ([\d.]+) ms")
for path in sorted(glob.glob(f"{out}/*.txt")):
    var = path.split("/")[-1].split(".")[0]
    for line in open(path):
        m = mm.search(line)
        if m:
            n, k, cnt, t, ms, pk = m.groups()
            key = ("mm", int(n), int(k), int(cnt), int(t))
            peak = max(peak, float(pk))
        else:
            m = fw.search(line)
            if not m:
                continue
            model, r, ms, ctx, pre = m.groups()
            key = ("fw", model, int(r))
            pkey = (var, ("pre", model, int(ctx)))
            best[pkey] = min(best.get(pkey, 1e18), float(pre))
        best[(var, key)] = min(best.get((var, key), 1e18), float(ms))

variants = [v for v in ("base", "new") if any(k[0] == v for k in best)]
keys = sorted({k for (_, k) in best}, key=str)
print(f"ceiling: {peak:.0f} GFLOP/s per core (highest same-run vdpbf16ps peak, hi+lo counted as one product)\n")
print("| matmul, 1 thread | T | " + " | ".join(f"{v} ms | {v} GFLOP/s (% of ceiling)" for v in variants) + " | new / base time |")
print("|---|---|" + "---|---|" * len(variants) + "---|")
for k in keys:
    if k[0] != "mm":
        continue
    _, n, kk, cnt, t = k
    fl = 2.0 * n * kk * cnt * t
    cells = []
    for v in variants:
        ms = best.get((v, k))
        cells.append(f"{ms:.3f} | {fl / ms / 1e6:.0f} ({100 * fl / ms / 1e6 / peak:.0f}%)" if ms else " | ")
    ratio = best.get(("new", k), 0) / best[("base", k)] if len(variants) == 2 else 0
    print(f"| [{n} x {kk}] x{cnt} | {t} | " + " | ".join(cells) + (f" | {ratio:.3f} |" if ratio else " | |"))
print()
print("| forward, 1 thread | R | " + " | ".join(f"{v} ms CPU (per row)" for v in variants) + " | new / base |")
print("|---|---|" + "---|" * len(variants) + "---|")
for k in keys:
    if k[0] != "fw":
        continue
    cells = [f"{best[(v, k)]:.3f} ({best[(v, k)] / k[2]:.3f})" for v in variants]
    ratio = best[("new", k)] / best[("base", k)] if len(variants) == 2 else 0
    print(f"| {k[1]} | {k[2]} | " + " | ".join(cells) + (f" | {ratio:.3f} |" if ratio else " | |"))
for k in keys:
    if k[0] != "pre":
        continue
    cells = [f"{best[(v, k)]:.3f} ms/token = {1000 / best[(v, k)]:.0f} tok/s" for v in variants]
    ratio = best[("new", k)] / best[("base", k)] if len(variants) == 2 else 0
    print(f"| {k[1]} prefill {k[2]} | | " + " | ".join(cells) + (f" | {ratio:.3f} |" if ratio else " | |"))
