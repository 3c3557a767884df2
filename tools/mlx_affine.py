#!/usr/bin/python3
"""mlx_affine.py — an independent reference for MLX affine quantization (issue 20, item 3).

Written from MLX's documentation alone (not from mtplx's sources, which it must check):
  https://ml-explore.github.io/mlx/build/html/python/_autosummary/mlx.core.quantize.html
  https://ml-explore.github.io/mlx/build/html/python/_autosummary/mlx.core.dequantize.html
What those pages say, and all this file relies on:
  - every `group_size` consecutive elements of a row (the last axis) of w form a group; mode
    "affine" supports group sizes 32, 64 (default), 128 and bits 2, 3, 4 (default), 5, 6, 8, and
    its scales have the input's type;
  - per group: alpha = max w_i, beta = min w_i, s = (alpha - beta) / (2^b - 1),
    w_hat_i = round((w_i - beta) / s); `scales` holds s and `biases` holds beta;
  - w_hat fits in b bits and is "packed in an unsigned 32-bit integer from the lower to upper bits":
    for 4 bits, 8 elements per uint32, the 1st in the 4 least significant bits, the 2nd in bits 4-7;
  - dequantize: w_i = s * w_hat_i + beta.
Only bits 4 and 8 are produced here (the widths whose codes never straddle a uint32; the ones mtplx
reads). The checkpoint wrapper follows what MLX conversions (mlx-lm) write: each quantized linear
`X.weight` becomes uint32 `X.weight` [rows, cols*bits/32] plus `X.scales` and `X.biases`
[rows, cols/group_size], and config.json gets "quantization": {"group_size": G, "bits": B}, with an
entry {"group_size", "bits"} per module whose parameters differ from those defaults.

Commands (numpy from Debian: apt-get install -y python3-numpy; run with /usr/bin/python3):
  selftest                              packing/dequantization known answers
  fixture SRC OUT DEQ                   quantize the fp32 HF checkpoint SRC to the mixed MLX fixture
                                        OUT (PLAN below) and write its dequantization, an fp32 HF
                                        checkpoint, to DEQ
  dequant MLX DEQ                       dequantize any MLX affine checkpoint (one model.safetensors)
  golden REF OUT                        OUT/golden.safetensors from REF, the `mtplx logits --mtp --out`
                                        output on the dequantized checkpoint (tensor names as in
                                        tests/data/goldens: input_ids, logits, hidden, mtp_logits)
The committed fixture tests/data/goldens-mlx/qwen3_5_dense_mixed comes from (IDS: the input_ids of
tests/data/goldens/qwen3_5_dense/golden.safetensors)
  tools/mlx_affine.py fixture tests/data/goldens/qwen3_5_dense OUT /tmp/deq
  build/mtplx logits --model /tmp/deq --tokens IDS --mtp --out /tmp/ref.safetensors
  tools/mlx_affine.py golden /tmp/ref.safetensors OUT
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

# ---------------------------------------------------------------------------------------------
# safetensors (the format: 8-byte little-endian header length, JSON header, raw little-endian data)

_NP = {"F32": np.float32, "F16": np.float16, "U32": np.uint32, "I32": np.int32, "BF16": np.uint16}


def st_read(path):
    """{name: (dtype string, numpy array)} of a safetensors file; BF16 arrays hold the raw uint16."""
    with open(path, "rb") as f:
        buf = f.read()
    n = struct.unpack("<Q", buf[:8])[0]
    hdr = json.loads(buf[8:8 + n])
    out = {}
    for name, t in hdr.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        arr = np.frombuffer(buf[8 + n + a:8 + n + b], dtype=np.dtype(_NP[t["dtype"]]).newbyteorder("<"))
        out[name] = (t["dtype"], arr.reshape(t["shape"]).copy())
    return out


def st_write(path, tensors, metadata=None):
    """Write {name: (dtype string, array)} in sorted name order."""
    hdr, blobs, off = {}, [], 0
    if metadata:
        hdr["__metadata__"] = metadata
    for name in sorted(tensors):
        dt, arr = tensors[name]
        raw = np.ascontiguousarray(arr, dtype=np.dtype(_NP[dt]).newbyteorder("<")).tobytes()
        hdr[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """Round to nearest even; raw uint16."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def to_f32(dt, arr):
    if dt == "BF16":
        return bf16_to_f32(arr)
    return arr.astype(np.float32)


def from_f32(dt, x):
    """fp32 values stored as dtype dt ("F32", "F16" or "BF16")."""
    if dt == "BF16":
        return f32_to_bf16(x)
    return np.asarray(x, dtype=_NP[dt])


# ---------------------------------------------------------------------------------------------
# the documented format

def pack(codes, bits):
    """codes [rows, cols] (each < 2^bits) -> uint32 [rows, cols*bits/32]: element k of a word at
    bits [k*bits, (k+1)*bits), the first element lowest."""
    per = 32 // bits
    rows, cols = codes.shape
    c = codes.astype(np.uint64).reshape(rows, cols // per, per)
    shifts = (np.arange(per, dtype=np.uint64) * bits)[None, None, :]
    return (c << shifts).sum(axis=2).astype(np.uint32)


def unpack(words, bits):
    """The inverse of pack: uint32 [rows, n] -> codes [rows, n*32/bits] (int64)."""
    per = 32 // bits
    rows, n = words.shape
    shifts = (np.arange(per, dtype=np.uint64) * bits)[None, None, :]
    c = (words.astype(np.uint64)[:, :, None] >> shifts) & ((1 << bits) - 1)
    return c.reshape(rows, n * per).astype(np.int64)


def quantize(w, bits, group_size, scale_dtype):
    """w [rows, cols] fp32 -> (uint32 words, scales, biases) with scales/biases stored as
    scale_dtype (raw arrays). The codes are computed against the stored (rounded) s and beta, and
    clipped to [0, 2^bits - 1], so dequantize() reproduces w to within s/2 per element."""
    rows, cols = w.shape
    assert bits in (4, 8) and cols % group_size == 0
    g = w.astype(np.float64).reshape(rows, cols // group_size, group_size)
    alpha, beta = g.max(axis=2), g.min(axis=2)
    s = (alpha - beta) / (2 ** bits - 1)
    s_st, b_st = from_f32(scale_dtype, s.astype(np.float32)), from_f32(scale_dtype, beta.astype(np.float32))
    s_q, b_q = to_f32(scale_dtype, s_st).astype(np.float64), to_f32(scale_dtype, b_st).astype(np.float64)
    safe = np.where(s_q > 0, s_q, 1.0)[:, :, None]
    q = np.where(s_q[:, :, None] > 0, np.round((g - b_q[:, :, None]) / safe), 0)
    q = np.clip(q, 0, 2 ** bits - 1).astype(np.int64).reshape(rows, cols)
    return pack(q, bits), s_st, b_st


def dequantize(words, scales, biases, scale_dtype, bits, group_size):
    """w = s * w_hat + beta per group, computed in fp64 and rounded once to fp32."""
    q = unpack(words, bits).astype(np.float64)
    rows, cols = q.shape
    s = to_f32(scale_dtype, scales).astype(np.float64)
    b = to_f32(scale_dtype, biases).astype(np.float64)
    assert s.shape == (rows, cols // group_size) and b.shape == s.shape
    g = q.reshape(rows, cols // group_size, group_size) * s[:, :, None] + b[:, :, None]
    return g.reshape(rows, cols).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# the mixed fixture

# (bits, group size, scale dtype) per quantized tensor: every combination mtplx supports, bf16 /
# f16 / f32 scales. Tensors with 128 inputs take the first plan entry whose group divides them,
# going round a list that starts with the group-128 entries, so both widths meet every group size.
PLAN_128 = [(4, 128, "BF16"), (8, 128, "F16"), (4, 64, "F32"), (8, 32, "BF16")]
PLAN_64 = [(4, 64, "BF16"), (8, 32, "BF16"), (4, 32, "F16"), (8, 64, "F32"), (4, 64, "F16")]


def quantizable(name, dt, arr):
    """The linears and the embedding (what MLX's nn.quantize converts): 2-D ".weight" tensors of a
    float dtype with at least 32 inputs. Norm weights are 1-D and conv1d 3-D, so they stay."""
    return name.endswith(".weight") and arr.ndim == 2 and dt in ("F32", "F16", "BF16") and arr.shape[1] % 32 == 0


def plan_for(idx128, idx64, cols):
    if cols % 128 == 0:
        return PLAN_128[idx128 % len(PLAN_128)], idx128 + 1, idx64
    return PLAN_64[idx64 % len(PLAN_64)], idx128, idx64 + 1


def cmd_fixture(src, out, deq):
    ts = st_read(os.path.join(src, "model.safetensors"))
    cfg = json.load(open(os.path.join(src, "config.json")))
    default = (4, 64)
    q_out, d_out, overrides, used = {}, {}, {}, set()
    i128 = i64 = 0
    for name in sorted(ts):
        dt, arr = ts[name]
        if not quantizable(name, dt, arr):
            q_out[name] = d_out[name] = (dt, arr)
            continue
        (bits, gs, sdt), i128, i64 = plan_for(i128, i64, arr.shape[1])
        w = to_f32(dt, arr)
        words, sc, bi = quantize(w, bits, gs, sdt)
        base = name[:-len(".weight")]
        q_out[name] = ("U32", words)
        q_out[base + ".scales"] = (sdt, sc)
        q_out[base + ".biases"] = (sdt, bi)
        d_out[name] = ("F32", dequantize(words, sc, bi, sdt, bits, gs))
        used.add((bits, gs, sdt))
        if (bits, gs) != default:
            overrides[base] = {"group_size": gs, "bits": bits}
        err = np.abs(d_out[name][1] - w).max()
        print(f"{name:48s} {str(list(arr.shape)):10s} q{bits} gs{gs:<3d} {sdt:4s} max|w - deq| {err:.3g}")
    for d in (out, deq):
        os.makedirs(d, exist_ok=True)
    qcfg = dict(cfg)
    qcfg["quantization"] = {"group_size": default[1], "bits": default[0], **overrides}
    json.dump(qcfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    shutil.copy(os.path.join(src, "config.json"), os.path.join(deq, "config.json"))
    meta = {"made_by": "tools/mlx_affine.py fixture (numpy, from MLX's documented affine format)",
            "source": src}
    st_write(os.path.join(out, "model.safetensors"), q_out, meta)
    st_write(os.path.join(deq, "model.safetensors"), d_out, {"made_by": "tools/mlx_affine.py dequantize"})
    print(f"combinations used: {sorted(used)}")


def cmd_dequant(mlx, deq):
    ts = st_read(os.path.join(mlx, "model.safetensors"))
    out = {}
    for name, (dt, arr) in ts.items():
        if name.endswith(".scales") or name.endswith(".biases"):
            continue
        if dt == "U32" and name.endswith(".weight"):
            base = name[:-len(".weight")]
            sdt, sc = ts[base + ".scales"]
            _, bi = ts[base + ".biases"]
            cols_bits = arr.shape[1] * 32  # = cols * bits
            groups = sc.shape[1]
            # cols = groups * gs; cols * bits = cols_bits with bits in {4, 8} and gs in {32, 64, 128}
            cands = [(b, g) for b in (4, 8) for g in (32, 64, 128) if groups * g * b == cols_bits]
            assert len(cands) == 1, (name, cands)
            bits, gs = cands[0]
            out[name] = ("F32", dequantize(arr, sc, bi, sdt, bits, gs))
        else:
            out[name] = (dt, arr)
    os.makedirs(deq, exist_ok=True)
    cfg = json.load(open(os.path.join(mlx, "config.json")))
    cfg.pop("quantization", None)
    json.dump(cfg, open(os.path.join(deq, "config.json"), "w"), indent=2)
    st_write(os.path.join(deq, "model.safetensors"), out)


def cmd_golden(ref, out):
    """OUT/golden.safetensors from ref, the output of `mtplx logits --mtp --out` on the numpy
    dequantization (input_ids, logits, post-norm hidden, mtp_logits), with provenance metadata."""
    r = st_read(ref)
    t = {k: r[k] for k in ("input_ids", "logits", "hidden", "mtp_logits") if k in r}
    meta = {"reference": "mtplx fp32 forward (itself checked against the HF goldens) on the numpy "
                         "dequantization (tools/mlx_affine.py) of this folder's MLX affine checkpoint",
            "logits": "logits[t] = next-token logits after input_ids[0..t]", "hidden": "post-final-norm",
            "mtp_logits": "mtp_logits[t] = MTP(embed(input_ids[t+1]), hidden[t]) at position t"}
    st_write(os.path.join(out, "golden.safetensors"), t, meta)


def cmd_selftest():
    # the documentation's example: 4 bits, the 1st element in the 4 least significant bits
    w = pack(np.array([[1, 2, 3, 4, 5, 6, 7, 8]]), 4)
    assert w.tolist() == [[0x87654321]], hex(int(w[0, 0]))
    w = pack(np.array([[0x11, 0x22, 0x33, 0xff]]), 8)
    assert w.tolist() == [[0xff332211]], hex(int(w[0, 0]))
    rng = np.random.default_rng(7)
    for bits in (4, 8):
        codes = rng.integers(0, 2 ** bits, size=(3, 64))
        assert (unpack(pack(codes, bits), bits) == codes).all()
    # w = s * w_hat + beta: one group with known codes, scale 0.5, bias -1
    words = pack(np.arange(32).reshape(1, 32) % 16, 4)
    d = dequantize(words, np.array([[0.5]], np.float32), np.array([[-1.0]], np.float32), "F32", 4, 32)
    assert np.array_equal(d[0], (np.arange(32) % 16) * 0.5 - 1.0)
    # round trip within s/2 (+ the scale rounding) for every combination
    for bits in (4, 8):
        for gs in (32, 64, 128):
            for sdt in ("F32", "F16", "BF16"):
                x = rng.standard_normal((5, 256)).astype(np.float32)
                q, s, b = quantize(x, bits, gs, sdt)
                y = dequantize(q, s, b, sdt, bits, gs)
                step = to_f32(sdt, s).max()
                assert np.abs(y - x).max() <= 0.5 * step + 0.01 * np.abs(x).max(), (bits, gs, sdt)
                # every group's min is reproduced (code 0 -> beta) up to beta's storage rounding
                g = x.reshape(5, -1, gs)
                assert np.allclose(y.reshape(5, -1, gs).min(axis=2), to_f32(sdt, b), rtol=0, atol=1e-6)
                assert np.abs(g.min(axis=2) - to_f32(sdt, b)).max() <= 0.01 * np.abs(x).max()
    print("selftest ok")


def main(argv):
    if len(argv) >= 1 and argv[0] == "selftest":
        return cmd_selftest()
    if len(argv) == 4 and argv[0] == "fixture":
        return cmd_fixture(*argv[1:])
    if len(argv) == 3 and argv[0] == "dequant":
        return cmd_dequant(*argv[1:])
    if len(argv) == 3 and argv[0] == "golden":
        return cmd_golden(*argv[1:])
    sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
