# Make tests/data/tokref-extra.json: HF transformers encode/decode references for the tokenizer
# tests, on strings chosen to hit the edge cases of tokenization (unicode, NFC, whitespace runs,
# contractions, special tokens in text, partial special tokens) plus decode of id prefixes (split
# UTF-8) and of random id sequences. Run where transformers is installed (the device machine):
#   python3 tools/tokref_extra.py OUT.json tiny=DIR qwen3=DIR llama3=DIR deepseek_v3=DIR
# Each tokenizer is loaded with AutoTokenizer.from_pretrained(DIR), like tokref-public.json.
import json
import random
import sys

import tokenizers
import transformers
from transformers import AutoTokenizer

STRINGS = [
    "The quick brown fox jumps over the lazy dog.",
    "I'M sure you'LL see she's gone, we'D've THEY'RE",
    "don't y'all ’s it’s ''s 'S'T",
    "e\u0301 vs \u00e9, A\u030a vs \u212b, \uf900 \u1112\u1161\u11ab",
    "na\u0308ive cafe\u0301 re\u0301sume\u0301",
    "日本語のテキストと中文文本，还有한국어。",
    "Привет, мир! Ελληνικά ΣΊΣΥΦΟΣ σίσυφος",
    "İstanbul ıi İI",
    "नमस्ते दुनिया  สวัสดีชาวโลก  مرحبا بالعالم  שלום עולם",
    "👋🏿 👨‍👩‍👧‍👦 🇺🇸🇯🇵 ❤️ ✨ 🤖🧠",
    "x = [1, 2, 3]; y = {'a': 1e-10, \"b\": 0xFF}\n",
    "12345678901234567890 3.14159265 -42 1,000,000 ١٢٣ ⅻ ²³",
    "a     b\t\t\tc\n\n\n\nd  \n  \n e",
    "    \n",
    "\n",
    " ",
    "  leading and trailing  ",
    "line1\r\nline2\r\n\r\nline3\rline4",
    "tab\tvtab\x0bff\x0cnel\u0085nbsp\u00a0ideo\u3000end",
    "a\u180eb a\u2028b a\u2029b a\u200bb a\u200db",
    "ctrl \x01\x02\x7f del",
    "private \ue000 \U0010fffd max \U0001f600",
    "def f(x):\n\treturn x ** 2  # square\n\n\nclass A:\n    pass\n",
    "<html><body><p class=\"x\">Hi &amp; bye</p></body></html>",
    "https://example.com/path?q=1&r=two#frag user@mail.org",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n",
    "text<|endoftext|>more<|endoftext|><|endoftext|>",
    "  <|im_end|>  <|im_start|>  ",
    "<|im_start <|im_end| <im_start|> |im_end|> <|endoftext",
    "<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
    "<think <thinking> </think > <tool_call",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>",
    "<|begin_of_text <|eot_id <|start_header_id|",
    "<\uff5cbegin\u2581of\u2581sentence\uff5c><\uff5cUser\uff5c>hi<\uff5cAssistant\uff5c>ok<\uff5cend\u2581of\u2581sentence\uff5c>",
    "<\uff5cUser <\uff5ctool\u2581sep\uff5c> x<\uff5ctool\u2581sep\uff5c>y",
    "\u2581word \u2581\u2581 \u0120G \u010a",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" * 5,
    "  " * 40 + "x",
    "\n" * 30,
    "!!!???...,,,;;;:::---___===+++***",
    "MixedCASE camelCase snake_case kebab-case SCREAMING_CASE",
    "über straße façade naïve coöperate Ærøskøbing",
    "zero\u0000byte",
]

RANDOM_SEQS = 25


def main():
    out_path = sys.argv[1]
    result = {"_made_by": {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                           "script": "tools/tokref_extra.py"}}
    pub = None
    if len(sys.argv) > 2 and sys.argv[2].startswith("--check="):
        pub = json.load(open(sys.argv[2][len("--check="):]))
        args = sys.argv[3:]
    else:
        args = sys.argv[2:]
    for arg in args:
        name, d = arg.split("=", 1)
        tok = AutoTokenizer.from_pretrained(d)
        ent = {"class": type(tok).__name__, "encode": [], "decode": []}
        if pub and name in pub:
            bad = 0
            for e in pub[name]["encode"]:
                if tok.encode(e["text"], add_special_tokens=False) != e["ids"]:
                    bad += 1
            print(name, type(tok).__name__, "public mismatches:", bad, flush=True)
        for s in STRINGS:
            ids = tok.encode(s, add_special_tokens=False)
            ent["encode"].append({"text": s, "ids": ids, "decoded": tok.decode(ids),
                                  "decoded_skip": tok.decode(ids, skip_special_tokens=True)})
            # prefixes cut inside multi-byte characters
            for k in sorted({1, 2, 3, len(ids) // 2, len(ids) - 1}):
                if 0 < k < len(ids):
                    ent["decode"].append({"ids": ids[:k], "skip_special": False, "text": tok.decode(ids[:k])})
        rng = random.Random(1234)
        n = len(tok)
        for _ in range(RANDOM_SEQS):
            ids = [rng.randrange(n) for _ in range(rng.randrange(1, 13))]
            for skip in (False, True):
                ent["decode"].append({"ids": ids, "skip_special": skip,
                                      "text": tok.decode(ids, skip_special_tokens=skip)})
        result[name] = ent
        print(name, "done", len(ent["encode"]), len(ent["decode"]), flush=True)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=True, indent=0)


if __name__ == "__main__":
    main()
