# cmp_logits.py A B: compares the tensors of two `mtplx logits` safetensors files (headers may differ by
# mode): prints, per tensor, bit-identical or the worst |A - B| and how many rows' argmax differ.
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); d = b[8 + n:]
    out = {}
    for k, v in h.items():
        if k == '__metadata__': continue
        s, e = v['data_offsets']; dt = {'F32': np.float32, 'I32': np.int32, 'F16': np.float16}[v['dtype']]
        out[k] = np.frombuffer(d[s:e], dtype=dt).reshape(v['shape'])
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
for k in sorted(a):
    if k not in b: print(f"{k}: only in A"); continue
    x, y = a[k], b[k]
    if x.shape != y.shape: print(f"{k}: shapes {x.shape} vs {y.shape}"); continue
    if x.tobytes() == y.tobytes(): print(f"{k}: bit-identical"); continue
    d = np.abs(x.astype(np.float64) - y.astype(np.float64)).max()
    am = (x.reshape(-1, x.shape[-1]).argmax(-1) != y.reshape(-1, y.shape[-1]).argmax(-1)).sum() if x.ndim >= 2 else 0
    print(f"{k}: worst |A-B| {d:.4g}, argmax differs in {am} of {x.reshape(-1, x.shape[-1]).shape[0]} rows, max|A| {np.abs(x).max():.4g}")
