#!/usr/bin/env python3
"""peer_spec.py - a peer server's decode speed on mtplx bench's own prompts, with and without its
speculative decoding, for issue 21's side-by-side comparison (bench/cuda.md). Python standard library only.

Usage (repo root):
  python3 bench/peer_spec.py BASE_URL --model DIR [--mtplx build/mtplx] [--prompts 8] [--prompt-len 64]
                             [--prompts-file F]
                             [--max-tokens 128] [--repeats 3] [--seed 1] [--label NAME] [--json]

The prompts are the ones `mtplx bench` decodes: prompt i is cut from DIR/val_code.txt (or --prompts-file F,
as `mtplx bench --prompts-file F` takes it; a DIR without val_code.txt needs it here) at the first line
start after offset i*len/n, prompt_len*6 + 64 bytes of text, encoded by `mtplx tokenize` (the model's own
tokenizer: the ids a GGUF conversion keeps) and truncated to --prompt-len ids. Each is sent as a token
array to BASE_URL/completion (the llama.cpp server's native endpoint) with the model's sampler settings
from DIR/generation_config.json (temperature, top_k, top_p; min_p 0; no penalties), seed S + i, n_predict
--max-tokens and ignore_eos (so every request decodes the same count), cache_prompt off. The server's own
timings of each response are used: decode tok/s = predicted tokens / predicted ms (the prompt's prefill is
not counted, as `mtplx bench` does not count it), and draft_n / draft_n_accepted when the server drafts.
Per pass (all prompts in turn) the tokens / ms are summed; the median pass of --repeats is reported.
Nothing here depends on the peer's build: start the server (e.g. with or without its speculative type) and
point this at it.
"""
import argparse
import json
import os
import subprocess
import sys
import urllib.request


def cut_prompts(model_dir, mtplx, n, plen, text_path=None):
    """Token-id prompts exactly as cli_bench_prompts (src/cli/gen_cli.c) cuts them."""
    with open(text_path or os.path.join(model_dir, "val_code.txt"), "rb") as f:
        text = f.read()
    out = []
    for i in range(n):
        off = int(i * len(text) / n)
        while 0 < off < len(text) and text[off - 1:off] != b"\n":
            off += 1
        want = plen * 6 + 64
        if off + want > len(text):
            want = len(text) - off
        while want > 0 and off + want < len(text) and (text[off + want] & 0xC0) == 0x80:
            want -= 1
        r = subprocess.run([mtplx, "tokenize", "--model", model_dir, "--file", "-", "--json"],
                           input=text[off:off + want], capture_output=True, check=True)
        ids = json.loads(r.stdout)["ids"][:plen]
        if not ids:
            sys.exit(f"peer_spec: prompt {i} is empty")
        out.append(ids)
    return out


def sampler(model_dir):
    """The model's generation_config.json sampler settings, with mtplx's defaults where absent."""
    try:
        with open(os.path.join(model_dir, "generation_config.json")) as f:
            g = json.load(f)
    except OSError:
        g = {}
    return {"temperature": g.get("temperature", 1.0), "top_k": g.get("top_k", 0), "top_p": g.get("top_p", 1.0)}


def complete(url, ids, s, seed, max_tokens):
    """One /completion request; returns its timings object (raises on an HTTP or server error)."""
    body = {"prompt": ids, "n_predict": max_tokens, "seed": seed, "ignore_eos": True, "cache_prompt": False,
            "stream": False, "min_p": 0.0, "repeat_penalty": 1.0, "presence_penalty": 0.0,
            "frequency_penalty": 0.0, **s}
    req = urllib.request.Request(url.rstrip("/") + "/completion", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        resp = json.load(r)
    t = resp.get("timings")
    if not t or "predicted_ms" not in t:
        raise RuntimeError(f"no timings in the response: {json.dumps(resp)[:300]}")
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("--model", required=True, help="mtplx model directory (val_code.txt, tokenizer)")
    ap.add_argument("--mtplx", default="build/mtplx")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--prompts-file", help="text the prompts are cut from (mtplx bench --prompts-file; "
                    "default DIR/val_code.txt)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--label", default="peer")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.prompts < 1 or a.prompt_len < 1 or a.max_tokens < 1 or a.repeats < 1:
        sys.exit("peer_spec: --prompts, --prompt-len, --max-tokens and --repeats must be >= 1")
    prompts = cut_prompts(a.model, a.mtplx, a.prompts, a.prompt_len, a.prompts_file)
    s = sampler(a.model)
    complete(a.url, prompts[0], s, a.seed, 8)  # warm-up, not reported
    passes = []
    for _ in range(a.repeats):
        tok = ms = drafted = accepted = 0
        for i, ids in enumerate(prompts):
            t = complete(a.url, ids, s, a.seed + i, a.max_tokens)
            tok += t["predicted_n"]
            ms += t["predicted_ms"]
            drafted += t.get("draft_n", 0) or 0
            accepted += t.get("draft_n_accepted", 0) or 0
        passes.append({"tok_s": 1000.0 * tok / ms, "tokens": tok, "ms": ms, "drafted": drafted,
                       "accepted": accepted})
    med = sorted(passes, key=lambda p: p["tok_s"])[len(passes) // 2]
    res = {"label": a.label, "url": a.url, "prompts": a.prompts, "prompt_len": a.prompt_len,
           "max_tokens": a.max_tokens, "sampler": s, "passes": passes, "median_tok_s": med["tok_s"],
           "acceptance": med["accepted"] / med["drafted"] if med["drafted"] else None}
    if a.json:
        print(json.dumps(res, indent=2))
        return
    tok_s = ", ".join(f"{p['tok_s']:.1f}" for p in passes)
    acc = f", drafts accepted {res['acceptance']:.3f} ({med['accepted']}/{med['drafted']})" if med["drafted"] else ""
    print(f"{a.label}: decode {med['tok_s']:.1f} tok/s (median of passes {tok_s}; {a.prompts} prompts x "
          f"{a.prompt_len} ids, {a.max_tokens} tokens, T {s['temperature']} top_k {s['top_k']} top_p "
          f"{s['top_p']}{acc})")


if __name__ == "__main__":
    main()
