#!/usr/bin/python3
"""Writes the tokenizer parity fixtures of tests/test_tokenizer.cpp, produced by the HF tokenizers
library (the reference):

  tests/data/tokenizer/tokenizer.json   a byte-level BPE in Qwen2's format (NFC, Qwen2's Split regex,
                                        ByteLevel), vocab ~2000, trained here on generated text, with
                                        special and non-special added tokens;
  tests/data/tokenizer/variants.json    other pipelines on the same vocab and merges (Llama-3 regex and
                                        TemplateProcessing BOS, GPT-2 ByteLevel regex, Digits and every
                                        Split behavior, a SentencePiece-style byte_fallback model, an
                                        unk_token model with fuse_unk and ignore_merges, no decoder);
  tests/data/tokenizer/cases.jsonl      per line: {"v": variant, "text" or "hex": input, "ids": reference
                                        ids, "special": add_special, and decode(ids) when it differs from the
                                        text: "nfc": 1 if it is the text's NFC, else "decoded": it}; or
                                        {"v", "decode": ids, "out": decode(ids), "out_skip": the same
                                        skipping special tokens};
  tests/data/tokenizer/gguf_pretokenizers.json   for GGUF pre-tokenizer names dlm reads (tests/test_gguf.cpp),
                                        the pre-tokens of sample texts as llama.cpp splits them: its regex
                                        for the name (src/llama-vocab.cpp) run by PyPI's `regex`, cross-checked
                                        against the tokenizers library running the source tokenizer.json's
                                        own regex ("hf": its pre-tokens where they differ). Checked once
                                        (2026-12-07) against llama.cpp's own way of running such a regex, by a
                                        throwaway program: libstdc++'s std::regex over the text with each code
                                        point past ASCII collapsed to one byte for its category: the same
                                        pre-tokens for all 230 texts.

Invalid UTF-8 inputs ("hex") are encoded as the reference encodes bytes.decode("utf-8", "replace");
decode cases draw random ids whose bytes are often invalid UTF-8. Deterministic (fixed seeds).
Run (these write the committed fixtures byte for byte; checked 2026-12-07, regex 2026.12.2):
     PYTHON=/usr/bin/python3 scripts/setup-venv.sh build/venv-tokenizers tokenizers==0.19.1 regex
     build/venv-tokenizers/bin/python tools/make_tokenizer_fixtures.py tests/data/tokenizer
"""
import copy
import json
import os
import random
import sys
import unicodedata

import regex
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
LLAMA3 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
# GGUF pre-tokenizer names -> (llama.cpp's regex for them, src/llama-vocab.cpp; the source tokenizer.json's regex).
# Ling's (inclusionAI/Ling-lite, Ling-mini-base-2.0): llama.cpp made its possessive quantifiers greedy and
# spelled (?i:...) as character classes (ggml-org/llama.cpp#12677).
GGUF_PRE = {
    ("bailingmoe", "bailingmoe2", "llada-moe"): (
        r"""'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""",
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""),
}
# Hand-written texts for them: letters, digit runs, CJK, punctuation, contractions (a long s: llama.cpp's
# regex is not case-folding), newlines and whitespace runs; random lines follow.
PRE_TEXTS = ["Hello world", "  leading and trailing  ", "12345678901234567890 and 3.14 or 1,000", "一二三四五六七八九十",
             "我想在apple工作1314151天～", "こんにちは、世界！", "한국어 텍스트", "Hello, world! (yes?) ...!!!",
             "I'm, you're, we've, they'll, she'd, it's, DON'T, I'M, We'Ve, THEY'LL, SHE'D, IT'S",
             "'s 't 're 've 'm 'll 'd 'x", "x'ſx it'ſ 'ſ", "rock'n'roll o'clock", "line one\nline two\n\nline four",
             "a\r\nb\r\n\r\nc", "\n\n\n", " \n \n  \n", "tabs\tand\t\ttabs \t x", "word   \n   word",
             "trailing spaces   ", "   ", "\u3000全角\u3000スペース", "nbsp\u00a0here\u00a0\u00a0x", "e\u0301 cafe\u0301 café",
             "🦙🦙 emoji 😀👍🏽", "def f(x):\n    return x ** 2\n", "$100 + 5% = <tag> {a: [1, 2]} #!/bin",
             "---====***", "Ελληνικά русский عربي עברית हिन्दी", "x\x1cy\x85z\u2028w", "½ ² ٣ ⅻ ①"]


SPECIAL = ["<|endoftext|>", "<|startoftext|>", "<|im_start|>", "<|im_end|>", "<|mdm_mask|>"]

WORDS = ("the of and to in is you that it he was for on are as with his they at be this have from or one had by "
         "word but not what all were we when your can said there use an each which she do how their if will up "
         "other about out many then them these so some her would make like him into time has look two more write "
         "go see number no way could people my than first water been call who oil its now find long down day did "
         "get come made may part model token decode mask block cache diffusion language parallel sample").split()
CONTRACTIONS = ["don't", "I'M", "we'Ve", "they'LL", "it'ſ", "she'd", "YOU'RE", "can'T", "he'S", "'tis", "o'clock",
                "rock'n'roll", "x'ſx", "'LL", "'Re", "'m", "l'été"]
ACCENTED = ["café", "naïve", "résumé", "Ångström", "straße", "São Paulo", "jalapeño", "Dvořák", "Łódź", "Tiếng Việt",
            "coöperate", "façade", "Ærøskøbing", "İstanbul", "ﬁnance", "ǅemal", "Ǆ", "ᾯ", "Ḉ"]
CJK = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等"
KANA = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテト"
OTHER_SCRIPTS = ["Ελληνικά γλώσσα", "Русский язык", "العربية لغة", "עברית שפה", "हिन्दी भाषा", "ภาษาไทย", "ქართული",
                 "Հայերեն", "ᚠᚢᚦᚨᚱᚲ", "𐌰𐌱𐌲", "𝐀𝐁𝐂 𝔸𝔹", "ꙮ", "ᏣᎳᎩ"]
EMOJI = ["😀", "🎉", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷🇯🇵", "1️⃣", "❤️", "🧑🏿‍💻", "🤷‍♀️", "🦙🦙", "✅", "☕"]
NUMBERS = ["12345678901234567890", "3.14159", "1,000,000", "٣٤٥", "①②③", "Ⅻ", "x²+y³", "0x1F", "1e-9", "2024-06-01",
           "७८९", "½", "99.9%", "१२३"]
SYMBOLS = ["∑∫≈≠", "→⇒↔", "┌─┐", "«»", "‘’“”", "…", "—", "§¶", "©®™", "€£¥", "°C", "\u200b", "\ufeff", "\ue000", "\x00\x01\x7f"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", "\u00a0", "\u3000", "\u2028",
          "\x0b", "\x0c", "\x85", "\x1c", "\u2003\u2009", " \t \n"]
MARKS = ["e\u0301", "a\u0316\u0301", "o\u0308\u0304", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab", "a\u1abf\u0316",
         "q\u0c3c\u0334", "\u0b47\u0b3e", "A\u030a", "\u0915\u093c", "n\u0303\u0323", "\u1e0b\u0323", "\u0344",
         "\U00011935\U00011930", "\u05d1\u05bc\u05b0"]
TOKENS_IN_TEXT = ["<|im_start|>user\nHi<|im_end|>\n", "<|endoftext|>", "<|mdm_mask|><|mdm_mask|>", "<|im_sta",
                  "<|im", "<|imx", "<think>ok</think>", "  <tool>  ", "x<tool>y", "</tool>  \n", "cafe\u0301!",
                  "<|startoftext|>", "<|im_end|><|im_start|>", "the hello there", "a<|fim|> b"]
CODE = ["def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}", "#include <vector>",
        "if (a != b && c >= d) return -1;", "x = {'k': [1, 2, 3]}", "std::vector<int> v{};", "<div class=\"a\">x</div>",
        "SELECT * FROM t WHERE id = 42;", "    // comment\n", "$ ls -la | grep '.txt'", "a->b::c", "λx. x + 1",
        "print(f\"{x!r:>10}\")", "```python\n", "\t\treturn;\r\n"]


def prose(rng):
    words = [rng.choice(WORDS) for _ in range(rng.randint(2, 9))]
    if rng.random() < 0.4:
        words.insert(rng.randrange(len(words) + 1), rng.choice(CONTRACTIONS))
    words = [w.upper() if rng.random() < 0.08 else w.capitalize() if rng.random() < 0.15 else w for w in words]
    return " ".join(words) + rng.choice(["", ".", "!", "?", ",", ";", ":", "...", " ?!"])


def segment(rng):
    kind = rng.random()
    if kind < 0.28:
        return prose(rng)
    if kind < 0.36:
        return rng.choice(CODE)
    if kind < 0.44:
        w = rng.choice(ACCENTED)
        return unicodedata.normalize("NFD", w) if rng.random() < 0.3 else w
    if kind < 0.52:
        return "".join(rng.choice(CJK if rng.random() < 0.6 else KANA) for _ in range(rng.randint(1, 12)))
    if kind < 0.57:
        return "".join(chr(rng.randint(0xAC00, 0xD7A3)) for _ in range(rng.randint(1, 5)))
    if kind < 0.63:
        return rng.choice(OTHER_SCRIPTS)
    if kind < 0.69:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 3)))
    if kind < 0.76:
        return rng.choice(NUMBERS) if rng.random() < 0.6 else str(rng.randint(0, 10 ** rng.randint(1, 15)))
    if kind < 0.80:
        return rng.choice(SYMBOLS)
    if kind < 0.86:
        return rng.choice(MARKS)
    if kind < 0.93:
        return rng.choice(TOKENS_IN_TEXT)
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x300, 0x36F), (0x2000, 0x206F),
              (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0x1F300, 0x1F64F), (0x10000, 0x1007F), (0xFF00, 0xFFEF)]
    lo, hi = rng.choice(blocks)
    return "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 6)))


def line(rng):
    parts = [segment(rng) for _ in range(rng.randint(1, 3))]
    out = parts[0]
    for p in parts[1:]:
        out += (rng.choice(SPACES) if rng.random() < 0.6 else " ") + p
    if rng.random() < 0.1:
        out = rng.choice(SPACES) + out
    if rng.random() < 0.1:
        out += rng.choice(SPACES)
    return out


def corrupt(rng, data):
    """Invalid UTF-8 made from valid bytes: stray continuation bytes, cut sequences, overlongs, surrogates."""
    data = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        pos = rng.randint(0, len(data))
        bad = rng.choice([b"\x80", b"\xbf", b"\xc0\xaf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                          b"\xf5", b"\xff", b"\xfe\xff", b"\xe2\x82", b"\xf0\x9f\x98", b"\xc3", b"\xe2\x28\xa1",
                          b"\xf0\x28\x8c\xbc", b"\xc2\xc3\xa9"])
        data[pos:pos] = bad
    if rng.random() < 0.3 and len(data) > 1:
        data = data[:-1]
    return bytes(data)


def train():
    rng = random.Random(1)
    corpus = [line(rng) for _ in range(4000)]
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=2000, min_frequency=2, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    tok.add_tokens([AddedToken("<think>", normalized=False), AddedToken("</think>", normalized=False),
                    AddedToken("<tool>", lstrip=True, rstrip=True, normalized=False),
                    AddedToken("</tool>", rstrip=True, normalized=False),
                    AddedToken("café", normalized=True), AddedToken("<|im", normalized=False),
                    AddedToken("hello", normalized=False), AddedToken(" x é", normalized=False)])
    tok.add_special_tokens([AddedToken("<|fim|>", lstrip=True, rstrip=True, special=True, normalized=False)])
    return tok, set(corpus)


def variants(base):
    """Other pipelines over the same vocab and merges: {name: tokenizer.json as a dict}."""
    ids = {t["content"]: t["id"] for t in base["added_tokens"]}
    bytelevel = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    split = lambda pattern, behavior, invert=False: {"type": "Split", "pattern": pattern, "behavior": behavior, "invert": invert}
    out = {}
    v = copy.deepcopy(base)
    v["normalizer"] = None
    v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split({"Regex": LLAMA3}, "Isolated"), bytelevel]}
    v["post_processor"] = {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|startoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<|startoftext|>": {"id": "<|startoftext|>", "ids": [ids["<|startoftext|>"]], "tokens": ["<|startoftext|>"]}}}
    out["llama3"] = v
    v = copy.deepcopy(base)
    v["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    v["post_processor"] = {"type": "RobertaProcessing", "sep": ["<|endoftext|>", ids["<|endoftext|>"]],
                           "cls": ["<|startoftext|>", ids["<|startoftext|>"]], "trim_offsets": True, "add_prefix_space": True}
    out["gpt2"] = v
    v = copy.deepcopy(base)
    v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, split({"Regex": QWEN2}, "Removed", True), bytelevel]}
    out["digits_removed_inverted"] = v
    v = copy.deepcopy(base)
    v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        split({"String": " "}, "MergedWithNext"), split({"Regex": r"\p{N}+"}, "Contiguous"),
        split({"Regex": r"[.,!?]"}, "MergedWithPrevious"), {"type": "Digits", "individual_digits": False},
        split({"Regex": r"\s+"}, "Removed"), split({"String": "e"}, "Isolated", True), bytelevel]}
    out["split_behaviors"] = v
    v = copy.deepcopy(base)
    next_id = max(max(v["model"]["vocab"].values()), max(ids.values())) + 1
    for b in range(256):
        v["model"]["vocab"][f"<0x{b:02X}>"] = next_id + b
    v["model"]["byte_fallback"] = True
    v["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                           {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    v["pre_tokenizer"] = None
    v["post_processor"] = None
    v["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    out["spm_byte_fallback"] = v
    v = copy.deepcopy(base)
    v["model"] |= {"unk_token": "<|endoftext|>", "fuse_unk": True, "ignore_merges": True}
    v["normalizer"] = None
    v["pre_tokenizer"] = split({"Regex": r"\s+"}, "Removed")
    v["decoder"] = None
    out["unk_fused"] = v
    return out


def gguf_pretokenizer_cases():
    """{"pipelines": [{"names", "regex", "cases": [{"text", "words", and "hf" where the source's own regex differs}]}]}."""
    rng = random.Random(3)
    texts = PRE_TEXTS + [line(rng) for _ in range(200)]
    pipelines = []
    for names, (ours, source) in GGUF_PRE.items():
        hf = pre_tokenizers.Split(Regex(source), behavior="isolated", invert=False)
        cases = []
        for t in texts:
            words = [m.group() for m in regex.finditer(ours, t)]
            assert "".join(words) == t, "the regex leaves no gap"
            case = {"text": t, "words": words}
            theirs = [w for w, _ in hf.pre_tokenize_str(t)]
            if theirs != words:
                case["hf"] = theirs
            cases.append(case)
        print(f"{names[0]}: {len(cases)} texts, {sum('hf' in c for c in cases)} split otherwise by the source's own regex")
        pipelines.append({"names": list(names), "regex": ours, "cases": cases})
    return {"pipelines": pipelines}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    folder = sys.argv[1]
    os.makedirs(folder, exist_ok=True)
    tok, train_lines = train()
    base = json.loads(tok.to_str())
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(base, f, ensure_ascii=False, separators=(",", ":"))  # the reference's content, compact
    vs = variants(base)
    with open(os.path.join(folder, "variants.json"), "w", encoding="utf-8") as f:
        json.dump({name: {k: v[k] for k in ("normalizer", "pre_tokenizer", "post_processor", "decoder")} |
                   {"model": {k: x for k, x in v["model"].items() if k not in ("vocab", "merges") and x != base["model"][k]}} |
                   {"vocab_extra": {k: i for k, i in v["model"]["vocab"].items() if k not in base["model"]["vocab"]}}
                   for name, v in vs.items()}, f, ensure_ascii=False, indent=1)
    refs = {"qwen2": tok} | {name: Tokenizer.from_str(json.dumps(v)) for name, v in vs.items()}

    rng = random.Random(2)
    tests = []
    while len(tests) < 1700:
        s = line(rng)
        if s not in train_lines:
            tests.append(s)
    nfc = normalizers.NFC()
    cases = []
    add = lambda **kw: cases.append(json.dumps(kw, ensure_ascii=False, separators=(",", ":")))
    for name, ref in refs.items():
        lines = tests if name == "qwen2" else tests[:100]
        for i, s in enumerate(lines):
            special = name != "qwen2" and i % 2 == 1
            ids = ref.encode(s, add_special_tokens=special).ids
            decoded = ref.decode(ids, skip_special_tokens=False)
            case = {"v": name, "text": s, "ids": ids}
            if special:
                case["special"] = True
            if decoded != s and decoded == nfc.normalize_str(s):
                case["nfc"] = 1
            elif decoded != s:
                case["decoded"] = decoded
            add(**case)
        for _ in range(120 if name == "qwen2" else 15):
            data = corrupt(rng, rng.choice(lines).encode("utf-8"))
            add(v=name, hex=data.hex(), ids=ref.encode(data.decode("utf-8", "replace"), add_special_tokens=False).ids)
        size = ref.get_vocab_size(with_added_tokens=True)
        specials = [ref.token_to_id(t) for t in SPECIAL + ["<|fim|>"]]
        byte_tokens = sorted(ref.token_to_id(t) for t in ref.get_vocab() if len(t) == 1 and ord(t) >= 0x80)
        for _ in range(200 if name == "qwen2" else 20):
            ids = []
            for _ in range(rng.randint(1, 12)):
                r = rng.random()
                ids.append(rng.choice(specials) if r < 0.15 else rng.choice(byte_tokens) if r < 0.55
                           else rng.randrange(size + 3))  # a few ids past the end: skipped
            if name == "spm_byte_fallback" and rng.random() < 0.7:
                ids += [ref.token_to_id(f"<0x{rng.choice([0xE2, 0x82, 0xAC, 0xC3, 0xA9, 0x41, 0xFF]):02X}>") for _ in range(3)]
            add(v=name, decode=ids, out=ref.decode(ids, skip_special_tokens=False), out_skip=ref.decode(ids, skip_special_tokens=True))
    with open(os.path.join(folder, "cases.jsonl"), "w", encoding="utf-8") as f:
        f.write("\n".join(cases) + "\n")
    with open(os.path.join(folder, "gguf_pretokenizers.json"), "w", encoding="utf-8") as f:
        json.dump(gguf_pretokenizer_cases(), f, ensure_ascii=False, separators=(",", ":"))
    total = sum(os.path.getsize(os.path.join(folder, n))
                for n in ("tokenizer.json", "variants.json", "cases.jsonl", "gguf_pretokenizers.json"))
    print(f"{folder}: {len(cases)} cases, {total} bytes in all")


if __name__ == "__main__":
    main()
