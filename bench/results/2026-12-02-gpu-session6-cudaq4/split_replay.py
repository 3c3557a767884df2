"""CPU replay of cuda_mma_sk.cu's stream-K split (sk_grid, the warp ranges, sk_owner, the partial slots)
for test_backend_cuda's matmul shapes at the default minimum units per warp and MTPLX_CUDA_SK_MINU=32 / 128
(bench/cuda.md, "Session 6"): asserts every unit is covered once, that the warps flushing a tile are
exactly its owners wf..wl, and that partial slots are unique and inside the scratch; prints
(blocks, warps, tiles with a mismatch) per shape. H200: 132 multiprocessors; q kernels 4 blocks / SM,
bf16 3. Run: python3 split_replay.py"""
def owner(u, Wn, TU): return ((u + 1) * Wn + TU - 1) // TU - 1
def sim(N, K, span, U, minu, occ=4, sms=132, warps=4):
    T = (N + 15) // 16; P = K // span; TU = T * P
    blocks = sms * occ; most = TU // (minu * warps)
    blocks = max(1, min(blocks, most))
    Wn = min(blocks * warps, TU)
    cover = [0] * TU; flushes = {}
    for w in range(Wn):
        u = w * TU // Wn; end = (w + 1) * TU // Wn
        while u < end:
            tile = u // P; a = u - tile * P; b = min(end, (tile + 1) * P) - tile * P
            for s in range(a, b): cover[tile * P + s] += 1
            flushes.setdefault(tile, []).append(w)
            u = tile * P + b
    assert all(c == 1 for c in cover), "cover"
    bad = 0
    for t, ws in flushes.items():
        f = t * P; wf, wl = owner(f, Wn, TU), owner(f + P - 1, Wn, TU)
        if ws != list(range(wf, wl + 1)): bad += 1; print("tile", t, ws, wf, wl)
    slots = [t + w for t, ws in flushes.items() for w in ws if len(ws) > 1]
    assert len(slots) == len(set(slots)), "slots"
    assert max(slots, default=0) < T + blocks * warps
    return blocks, Wn, bad
for minu in (None, 32, 128):
    for (N, K) in ((100, 384), (40, 5120), (12, 256), (520, 2048)):
        q = sim(N, K, 128, 4, minu or 8); b = sim(N, K, 32, 8, minu or 16, occ=3)
        print(minu, N, K, "q", q, "bf16", b)
