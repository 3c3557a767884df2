#!/usr/bin/env python3
"""The PyTorch + transformers peer of `mtplx bench --device cuda` (issue 21, "Peers"; bench/cuda.md).

Runs on the GPU machine, whose python3 has torch and transformers. For a Hugging Face checkpoint
directory (the embedded model, or a `mtplx synth` checkpoint: HF layout), on one GPU, in bf16:

  decode   greedy `generate` at batch 1: the time of N + 1 new tokens minus the time of 1 new token,
           divided by N (so the prompt's prefill and the first token are left out);
  prefill  one forward over a T-token prompt (random token ids, no cache kept), T / seconds.

Each figure is the best of --reps runs after one warm-up. transformers is used as installed: when the
Gated DeltaNet fast kernels (flash-linear-attention, causal-conv1d) are missing it runs its PyTorch
fallback, which is what a user of that install gets; the script prints which path it took.

    python3 bench/hf_peer.py MODEL_DIR [--new-tokens 64] [--prefill 512,4096] [--reps 3] [--json]
"""
import argparse
import json
import sys
import time


def timed(fn, torch):
    """Seconds of fn() with the GPU drained before and after."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def best_of(reps, fn, torch):
    fn()  # warm-up: kernels compiled / autotuned, allocator primed
    return min(timed(fn, torch) for _ in range(reps))


def decode_tok_s(model, torch, new_tokens, reps):
    """Greedy decode tok/s at batch 1 after an 8-token prompt (see the module comment)."""
    ids = torch.tensor([[11, 22, 33, 44, 55, 66, 77, 88]], device="cuda")

    def gen(n):
        return lambda: model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                      pad_token_id=0, eos_token_id=None)
    t1 = best_of(reps, gen(1), torch)
    tn = best_of(reps, gen(new_tokens + 1), torch)
    return new_tokens / max(tn - t1, 1e-9), t1, tn


def prefill_tok_s(model, torch, n, vocab, reps):
    """Tokens per second of one forward over an n-token prompt."""
    g = torch.Generator(device="cpu").manual_seed(n)
    ids = torch.randint(0, vocab, (1, n), generator=g).to("cuda")

    def fwd():
        with torch.no_grad():
            model(ids, use_cache=False, logits_to_keep=1)
    return n / best_of(reps, fwd, torch)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--prefill", default="512,4096", help="comma-separated prompt lengths ('' for none)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    import torch
    import transformers
    t0 = time.perf_counter()
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16, device_map="cuda")
    model.eval()
    load_s = time.perf_counter() - t0
    fast = []
    for mod in ("fla", "causal_conv1d"):
        try:
            __import__(mod)
            fast.append(mod)
        except ImportError:
            pass
    out = {"model": a.model, "transformers": transformers.__version__, "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name(0), "load_s": round(load_s, 2),
           "gdn_fast_kernels": fast or "none (PyTorch fallback)",
           "params": sum(p.numel() for p in model.parameters())}
    with torch.no_grad():
        tps, t1, tn = decode_tok_s(model, torch, a.new_tokens, a.reps)
    out.update(decode_tok_s=round(tps, 2), decode_new_tokens=a.new_tokens,
               gen1_s=round(t1, 4), gen_n_s=round(tn, 4))
    vocab = model.config.get_text_config().vocab_size
    for n in [int(x) for x in a.prefill.split(",") if x]:
        try:
            out[f"prefill_{n}_tok_s"] = round(prefill_tok_s(model, torch, n, vocab, a.reps), 1)
        except torch.cuda.OutOfMemoryError as e:  # report, do not hide: the figure is then missing
            out[f"prefill_{n}_tok_s"] = f"out of memory: {str(e).splitlines()[0]}"
            torch.cuda.empty_cache()
    if a.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:24s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
