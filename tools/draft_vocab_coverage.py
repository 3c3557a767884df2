#!/usr/bin/env python3
"""Coverage of a draft vocabulary subset: the share of a corpus's tokens whose id lies in the N ids
that tok_common_ids (src/tokenizer/tokenizer.c) ranks first -- the added tokens, then the base
alphabet, then merged tokens by merge rank (docs/speculative.md, "Draft vocabulary subset").

usage: draft_vocab_coverage.py TOKENIZER_JSON VOCAB IDS_JSON [N ...]
  IDS_JSON: the output of `mtplx tokenize --model DIR --file F --json` ({"ids": [...]}).
  VOCAB: the model's vocab_size (config.json), >= the tokenizer's ids.
Prints N, the subset's share of the corpus's tokens, and the same for the N most frequent ids of the
corpus itself (an upper bound no fixed ranking can beat on this corpus)."""
import json
import sys
from collections import Counter


def common_ids(tok, vocab_size):
    model = tok["model"]
    vocab = model["vocab"]
    rank = {}
    for r, m in enumerate(model.get("merges", [])):
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        out = vocab.get(a + b)
        if out is not None and out not in rank:
            rank[out] = r
    added = {t["id"] for t in tok.get("added_tokens", [])}
    known = set(vocab.values())
    keys = []
    for i in range(vocab_size):
        if i in added:
            k = (0, 0)
        elif i in known and i not in rank:
            k = (1, 0)
        elif i in rank:
            k = (2, rank[i])
        else:
            k = (3, 0)
        keys.append((k, i))
    keys.sort()
    return [i for _, i in keys]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    tok = json.load(open(sys.argv[1], encoding="utf-8"))
    vocab_size = int(sys.argv[2])
    ids = json.load(open(sys.argv[3]))["ids"]
    sizes = [int(x) for x in sys.argv[4:]] or [32768, 16384, 8192, 4096]
    order = common_ids(tok, vocab_size)
    freq = Counter(ids)
    top = [c for _, c in freq.most_common()]
    print(f"{len(ids)} tokens, {len(freq)} distinct ids, vocab {vocab_size}")
    print(f"{'N':>8} {'merge-order subset':>20} {'corpus top-N (bound)':>22}")
    for n in sizes:
        sub = set(order[:n])
        cov = sum(c for i, c in freq.items() if i in sub) / len(ids)
        bound = sum(top[:n]) / len(ids)
        print(f"{n:>8} {cov:>20.4f} {bound:>22.4f}")


if __name__ == "__main__":
    main()
