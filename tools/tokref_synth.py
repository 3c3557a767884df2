# Make small synthetic tokenizer.json files that use the pipeline components the four real fixture
# tokenizers do not (Metaspace split/prepend "first", Digits, every Split behaviour and invert,
# Lowercase/Replace/Strip/Prepend/NFKC/NFD normalizers, byte_fallback, unk + fuse_unk,
# continuing_subword_prefix / end_of_word_suffix, ignore_merges, added tokens with lstrip/rstrip/
# single_word/normalized, Strip/Replace/Metaspace/BPEDecoder decoders), and record what the
# `tokenizers` library gives for them. Run where `tokenizers` is installed (the device machine):
#   python3 tools/tokref_synth.py OUTDIR CORPUS.txt [deepseek_dir]
# OUTDIR gets synth-<name>/tokenizer.json and tokref-synth.json; with deepseek_dir it also records
# Tokenizer.from_file(deepseek tokenizer.json) (file semantics, no transformers class override).
import json
import os
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer

sys.path.insert(0, os.path.dirname(__file__))
from tokref_extra import STRINGS  # noqa: E402

EXTRA = [
    "HELLO WORLD and hello world and Hello World!",
    "x<mask> y <mask>z   <mask>   end",
    "[sw] a[sw] [sw]b ([sw]) [sw]",
    "<r>   after <r>\n\nnext<r>",
    "phone 555-1234, total: 1,234.56; ok! ABCdef GHIjk",
    "ünïcödé ＦＵＬＬＷＩＤＴＨ ﬁ ligature ① ㎏",
    "   spaces   everywhere   ",
    "▁already▁replaced ▁▁x",
    "unseen chars: ☃ ∑ 𝔘 中",
]


def trained(model_kwargs, pre, norm, corpus, vocab_size, special, byte_fallback_tokens=False, ignore_merges=False,
            initial_alphabet=None):
    tok = Tokenizer(BPE(**{k: v for k, v in model_kwargs.items() if k in ("unk_token", "continuing_subword_prefix",
                                                                              "end_of_word_suffix")}))
    tok.normalizer = norm
    tok.pre_tokenizer = pre
    kw = dict(vocab_size=vocab_size, special_tokens=special, show_progress=False)
    for k in ("continuing_subword_prefix", "end_of_word_suffix"):
        if k in model_kwargs:
            kw[k] = model_kwargs[k]
    if initial_alphabet:
        kw["initial_alphabet"] = initial_alphabet
    tok.train_from_iterator(corpus, BpeTrainer(**kw))
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    if byte_fallback_tokens:
        for b in range(256):
            name = "<0x%02X>" % b
            if name not in vocab:
                vocab[name] = len(vocab)
    data["model"].update({k: v for k, v in model_kwargs.items()})
    data["model"]["ignore_merges"] = ignore_merges
    return Tokenizer.from_str(json.dumps(data))


def main():
    out, corpus_path = sys.argv[1], sys.argv[2]
    text = open(corpus_path, encoding="utf-8").read()
    corpus = text.split("\n")[:6000] + STRINGS + EXTRA
    strings = STRINGS + EXTRA
    os.makedirs(out, exist_ok=True)
    toks = {}

    # A: SentencePiece-like: normalizers + Metaspace(first, split) + byte fallback + unk + fused unk
    a = trained({"unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True},
                pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=True),
                normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " "),
                                      normalizers.Strip(left=True, right=False)]),
                corpus, 700, ["<unk>", "<s>", "</s>"], byte_fallback_tokens=True)
    a.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                   decoders.Strip(content=" ", left=1, right=0)])
    a.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, special=True, normalized=False)])
    a.add_tokens([AddedToken("[sw]", single_word=True, normalized=False),
                  AddedToken("<r>", rstrip=True, normalized=False),
                  AddedToken("HELLO WORLD", normalized=True)])
    toks["metaspace"] = a

    # B: splits of every behaviour, digits, subword prefix + word suffix, unk not fused
    b = trained({"unk_token": "[UNK]", "fuse_unk": False, "continuing_subword_prefix": "##",
                 "end_of_word_suffix": "</w>"},
                pre_tokenizers.Sequence([
                    pre_tokenizers.Split(Regex(r"\s+"), behavior="removed"),
                    pre_tokenizers.Digits(individual_digits=False),
                    pre_tokenizers.Split(Regex(r"[.,;:!?]"), behavior="merged_with_previous"),
                    pre_tokenizers.Split("-", behavior="merged_with_next"),
                    pre_tokenizers.Split(Regex(r"[A-Z]"), behavior="contiguous"),
                ]),
                normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(), normalizers.Prepend("^")]),
                corpus, 600, ["[UNK]", "[CLS]"])
    b.decoder = decoders.Sequence([decoders.Replace("##", ""), decoders.BPEDecoder(suffix="</w>")])
    toks["splits"] = b

    # C: GPT-2 style byte level with the built-in regex, add_prefix_space, ignore_merges
    c = trained({}, pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True), None, corpus, 800,
                ["<|endoftext|>"], ignore_merges=True, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    c.decoder = decoders.ByteLevel()
    c.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    toks["gpt2"] = c

    # D: Whitespace + inverted splits + individual digits, NFKD + Strip, Metaspace decoder
    d = trained({"unk_token": "<unk>"},
                pre_tokenizers.Sequence([
                    pre_tokenizers.WhitespaceSplit(),
                    pre_tokenizers.Split(Regex(r"[aeiou]+"), behavior="merged_with_next", invert=True),
                    pre_tokenizers.Digits(individual_digits=True),
                    pre_tokenizers.Split(Regex(r"\p{P}"), behavior="removed", invert=True),
                ]),
                normalizers.Sequence([normalizers.NFKD(), normalizers.Strip(), normalizers.Replace("e", "E")]),
                corpus, 500, ["<unk>"])
    d.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    toks["inverted"] = d

    # E: Whitespace pre-tokenizer, Metaspace(always, no split) after it, NFC + lowercase
    e = trained({"unk_token": "<unk>", "byte_fallback": True},
                pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                         pre_tokenizers.Metaspace(replacement="_", prepend_scheme="always",
                                                                  split=False)]),
                normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()]),
                corpus, 400, ["<unk>"], byte_fallback_tokens=True)
    e.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement="_", prepend_scheme="always")])
    toks["whitespace"] = e

    result = {"_made_by": {"tokenizers": tokenizers.__version__, "script": "tools/tokref_synth.py"}}
    for name, tok in toks.items():
        d_ = os.path.join(out, "synth-" + name)
        os.makedirs(d_, exist_ok=True)
        tok.save(os.path.join(d_, "tokenizer.json"))
        tok = Tokenizer.from_file(os.path.join(d_, "tokenizer.json"))
        ent = []
        for s in strings:
            ids = tok.encode(s, add_special_tokens=False).ids
            ent.append({"text": s, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                        "decoded_skip": tok.decode(ids, skip_special_tokens=True)})
        result[name] = {"encode": ent}
        print(name, "vocab", tok.get_vocab_size(), flush=True)
    if len(sys.argv) > 3:
        tok = Tokenizer.from_file(os.path.join(sys.argv[3], "tokenizer.json"))
        ent = []
        for s in strings:
            ids = tok.encode(s, add_special_tokens=False).ids
            ent.append({"text": s, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                        "decoded_skip": tok.decode(ids, skip_special_tokens=True)})
        result["deepseek_v3_file"] = {"encode": ent}
    with open(os.path.join(out, "tokref-synth.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=True, indent=0)


if __name__ == "__main__":
    main()
