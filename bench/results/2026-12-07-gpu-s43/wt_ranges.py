"""Session 43: sk-wt.patch's whole-tile warp walks, per tile, exactly the span ranges the stream-K split's warps
hold of it, in the same warp order (so its partials and their sum are the split's). Replays both index
computations of k_sk_qdp (the split's per-warp loop; WT's virtual warps wf..wl via sk_owner) for random
shapes with Wn <= TU (the kernel's "at most one warp per unit") and compares. Prints the mismatches (0)."""
import random


def owner(u, wn, tu):  # sk_owner
    return ((u + 1) * wn + tu - 1) // tu - 1


def split(t, p, wn):  # k_sk_qdp, WT = 0: warp w's range, tile by tile
    tu, per = t * p, {}
    for w in range(wn):
        u, end = w * tu // wn, (w + 1) * tu // wn
        while u < end:
            tile = u // p
            a, b = u - tile * p, min(end, (tile + 1) * p) - tile * p
            per.setdefault(tile, []).append((w, a, b))
            u = tile * p + b
    return per


def whole(t, p, wn):  # k_sk_qdp, WT = 1: warp `tile` walks the split's warps of its tile
    tu, per = t * p, {}
    for tile in range(t):
        f = tile * p
        for ww in range(owner(f, wn, tu), owner(f + p - 1, wn, tu) + 1):
            s0, e0 = max(ww * tu // wn, f), min((ww + 1) * tu // wn, f + p)
            per.setdefault(tile, []).append((ww, s0 - f, e0 - f))
    return per


random.seed(43)
bad = 0
for _ in range(20000):
    t, p = random.randint(1, 600), random.randint(1, 48)
    wn = random.randint(1, min(t * p, 4096))
    a, b = split(t, p, wn), whole(t, p, wn)
    if a != b or any(e <= s for L in b.values() for _, s, e in L):
        bad += 1
        print("mismatch", t, p, wn)
print("shapes with a mismatch:", bad)
