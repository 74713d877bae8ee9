#!/usr/bin/python3
"""Writes the fixtures of tests/test_tokenizer_gemma.cpp: DiffusionGemma's (Gemma 4's) tokenizer and
chat template, with the HF tokenizers library and transformers as the reference.

Inputs (Hugging Face itself is not needed):
  VOCAB_GGUF  the real Gemma 4 vocabulary: llama.cpp's models/ggml-vocab-gemma-4.gguf (in llama.cpp's
              repository and in the llama-cpp-python sdist, vendor/llama.cpp/models/). It holds the
              262,144 tokens, their types and the 514,906 merges of google/gemma-4's tokenizer.json;
              its .inp / .out files beside it (ids written by transformers from the HF file) are
              checked against the rebuilt tokenizer.
  TEMPLATE    Gemma 4's chat template: llama.cpp's models/templates/google-gemma-4-31B-it.jinja (the
              chat_template.jinja of google/gemma-4-31B-it; DiffusionGemma's processor is
              Gemma4Processor with GemmaTokenizer).

The tokenizer.json is rebuilt as the Gemma converter writes it (normalizer Replace " " -> "▁",
pre-tokenizer Split " " MergedWithPrevious, BPE with byte_fallback, fuse_unk and <unk>, decoder
Replace / ByteFallback / Fuse, TemplateProcessing <bos> $A; added tokens: control tokens special,
user-defined ones not). The committed data is small:

  tests/data/tokenizer_gemma/tokenizer.json  the real file pruned to what the samples need: every
        symbol the BPE forms while encoding them, every merge that is ever a candidate, the byte
        tokens and the added tokens, all with their real ids (the pruned file encodes the samples
        exactly as the full one: checked here). The test fills the other ids up to 262,144.
  tests/data/tokenizer_gemma/cases.jsonl     per line {"text" or "hex", "ids", "ids_bos", "out",
        "out_skip"} (encode without / with special tokens, decode of ids without / with
        skip_special_tokens), or {"decode": ids, "out", "out_skip"} for random ids.
  tests/data/tokenizer_gemma/chat.json       conversations rendered by transformers' apply_chat_template
        with TEMPLATE, with and without the generation prompt, with thinking off (the default) and on
        (enable_thinking=True, an entry's "enable_thinking"), and their ids.
  tests/data/tokenizer_gemma/source.json     the full vocabulary's size and merge count, the template's
        file name and SHA-256.

Run: python3 -m venv build/venv-gemma && build/venv-gemma/bin/pip install tokenizers transformers jinja2 gguf
     build/venv-gemma/bin/python tools/make_gemma_tokenizer_fixtures.py \
         <llama.cpp>/models/ggml-vocab-gemma-4.gguf <llama.cpp>/models/templates/google-gemma-4-31B-it.jinja \
         tests/data/tokenizer_gemma
Deterministic (fixed seeds).
"""
import hashlib
import json
import os
import random
import sys

from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tokenizer_fixtures as common  # noqa: E402  (the shared text generators)

CONTROL, USER_DEFINED = 3, 4
GEMMA_SEGMENTS = [
    "<bos>", "<eos>", "<pad>", "<|turn>user\nHi<turn|>\n", "<|turn>model\n", "<turn|>", "<|turn", "turn|>", "<|tur",
    "<|channel>thought\n<channel|>", "<|think|>", "<|tool>declaration:f{}<tool|>", "<|tool_call>call:f{a:<|\"|>x<|\"|>}<tool_call|>",
    "<|tool_response>response:f{value:1}<tool_response|>", "<|image|>", "<|image><image|>", "<|audio|>", "<|video|>",
    "<mask>", "<unk>", "<unused3>", "[multimodal]", "<0x41>", "▁", "▁▁x", "x▁ ▁y", "<bos<bos>>", "<<turn|>>",
]
RUNS = [" " * 2, " " * 7, " " * 31, " " * 40, "\t" * 3, "\t" * 33, "\n" * 2, "\n" * 5, "\n" * 32, "\r\n" * 3, " \n \n",
        "\t \t", "\u00a0\u00a0", "\u3000"]


def read_vocab(path):
    """tokens, token types and merges (pairs) of a vocab-only GGUF."""
    from gguf import GGUFReader
    r = GGUFReader(path)
    field = lambda k: r.fields[k].contents()
    if field("tokenizer.ggml.model") != "gemma4":
        sys.exit(f"{path}: tokenizer.ggml.model is {field('tokenizer.ggml.model')!r}, expected 'gemma4'")
    tokens, types = field("tokenizer.ggml.tokens"), field("tokenizer.ggml.token_type")
    index = {t: i for i, t in enumerate(tokens)}
    merges = []
    for m in field("tokenizer.ggml.merges"):
        cuts = [k for k in range(1, len(m)) if m[k] == " " and m[:k] in index and m[k + 1:] in index and m[:k] + m[k + 1:] in index]
        if not cuts:
            sys.exit(f"{path}: merge {m!r} does not split into two tokens of the vocabulary")
        merges.append((m[:cuts[0]], m[cuts[0] + 1:]))
    return tokens, types, merges


def tokenizer_json(tokens, types, merges):
    """The tokenizer.json of Gemma 4 over this vocabulary."""
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": types[i] == CONTROL} for i, t in enumerate(tokens) if types[i] in (CONTROL, USER_DEFINED)]
    bos = {"SpecialToken": {"id": "<bos>", "type_id": 0}}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False},
        "post_processor": {"type": "TemplateProcessing", "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, bos, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<bos>": {"id": "<bos>", "ids": [tokens.index("<bos>")], "tokens": ["<bos>"]}}},
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                                                     {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": [list(m) for m in merges]},
    }


def check_llama_cpp_cases(tok, vocab_path):
    """The ids transformers wrote for llama.cpp's test texts (.inp / .out) must come out again."""
    inp, out = vocab_path + ".inp", vocab_path + ".out"
    if not (os.path.exists(inp) and os.path.exists(out)):
        print("no .inp / .out beside the vocabulary: not checked")
        return
    texts = open(inp, encoding="utf-8").read().split("\n__ggml_vocab_test__\n")[:-1]
    expected = [[int(x) for x in line.split()] for line in open(out, encoding="utf-8").read().split("\n")[:len(texts)]]
    bad = [t for t, e in zip(texts, expected) if tok.encode(t, add_special_tokens=False).ids != e]
    if bad:
        sys.exit(f"the rebuilt tokenizer.json differs from the reference on {len(bad)} texts, first {bad[0]!r}")
    print(f"{len(texts)} texts of {os.path.basename(out)} encode as the reference wrote them")


def sample_texts(rng, count):
    """Lines of the shared generator with Gemma's markers, whitespace runs and near misses mixed in."""
    out = []
    while len(out) < count:
        parts = [common.line(rng)]
        for _ in range(rng.randint(0, 2)):
            parts.insert(rng.randint(0, len(parts)), rng.choice(GEMMA_SEGMENTS if rng.random() < 0.6 else RUNS))
        out.append("".join(parts))
    return out


class merge_tracer:
    """Runs the BPE of the reference over words, collecting every symbol formed and every merge that
    is ever a candidate (with the token it makes): what a pruned vocabulary must keep to encode those words the same."""

    def __init__(self, tj):
        self.vocab = tj["model"]["vocab"]
        self.rank = {tuple(m): r for r, m in enumerate(tj["model"]["merges"])}
        self.symbols, self.candidates = set(), set()

    def word(self, w):
        syms = []
        for c in w:
            syms += [c] if c in self.vocab else [f"<0x{b:02X}>" for b in c.encode("utf-8")]
        self.symbols.update(syms)
        while len(syms) > 1:
            pairs = [(self.rank[p], i) for i, p in enumerate(zip(syms, syms[1:])) if p in self.rank]
            self.candidates.update(p for p in zip(syms, syms[1:]) if p in self.rank)
            if not pairs:
                break
            _, i = min(pairs)
            syms[i:i + 2] = [syms[i] + syms[i + 1]]
            self.symbols.add(syms[i])

    def text(self, s, added):
        """The words of `s`: the pieces between added tokens, spaces replaced by ▁."""
        i = start = 0
        while i < len(s):
            hit = next((a for a in added if s.startswith(a, i)), None)
            if hit is None:
                i += 1
                continue
            if start < i:
                self.word(s[start:i].replace(" ", "▁"))
            i = start = i + len(hit)
        if start < len(s):
            self.word(s[start:].replace(" ", "▁"))


def pruned(tj, tracer):
    keep = tracer.symbols | {a + b for a, b in tracer.candidates} | {t["content"] for t in tj["added_tokens"]}
    keep |= {f"<0x{b:02X}>" for b in range(256)} | {"<unk>"}
    out = json.loads(json.dumps(tj))
    out["model"]["vocab"] = {t: i for t, i in tj["model"]["vocab"].items() if t in keep}
    out["model"]["merges"] = [m for m in tj["model"]["merges"] if tuple(m) in tracer.candidates]
    return out


def encode_cases(ref, texts, rng):
    cases = []
    for s in texts:
        ids = ref.encode(s, add_special_tokens=False).ids
        case = {"text": s, "ids": ids, "ids_bos": ref.encode(s, add_special_tokens=True).ids,
                "out": ref.decode(ids, skip_special_tokens=False), "out_skip": ref.decode(ids, skip_special_tokens=True)}
        cases.append(case)
    for _ in range(150):
        data = common.corrupt(rng, rng.choice(texts).encode("utf-8"))
        ids = ref.encode(data.decode("utf-8", "replace"), add_special_tokens=False).ids
        cases.append({"hex": data.hex(), "ids": ids, "ids_bos": ref.encode(data.decode("utf-8", "replace"), add_special_tokens=True).ids,
                      "out": ref.decode(ids, skip_special_tokens=False), "out_skip": ref.decode(ids, skip_special_tokens=True)})
    return cases


def decode_cases(ref, tj, rng):
    """Random ids of the pruned vocabulary: byte tokens (often invalid UTF-8), added tokens, the rest."""
    vocab = tj["model"]["vocab"]
    added = [t["id"] for t in tj["added_tokens"]]
    byte_ids = [vocab[f"<0x{b:02X}>"] for b in range(256)]
    utf8_leads = [vocab[f"<0x{b:02X}>"] for b in (0xE2, 0x82, 0xAC, 0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80, 0x41, 0xFF)]
    others = sorted(vocab.values())
    cases = []
    for _ in range(300):
        ids = []
        for _ in range(rng.randint(1, 14)):
            r = rng.random()
            ids.append(rng.choice(added) if r < 0.2 else rng.choice(utf8_leads) if r < 0.45 else rng.choice(byte_ids) if r < 0.55
                       else 262144 + rng.randrange(5) if r < 0.58 else rng.choice(others))
        cases.append({"decode": ids, "out": ref.decode(ids, skip_special_tokens=False),
                      "out_skip": ref.decode(ids, skip_special_tokens=True)})
    return cases


CONVERSATIONS = [
    [{"role": "system", "content": "You are a careful assistant."}, {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "2+2 is 4."}, {"role": "user", "content": "And 3+3?"}],
    [{"role": "user", "content": "Why is the sky blue?"}],
    [{"role": "developer", "content": "  Be brief.\n"}, {"role": "user", "content": "\tHi there \u3000"},
     {"role": "assistant", "content": " <|channel>thought\nThe user greets me.<channel|>Hello! \n"},
     {"role": "user", "content": "Tell me a joke.\x1c"}],
    [{"role": "user", "content": "Count: 1 2 3"}, {"role": "assistant", "content": "4"}, {"role": "assistant", "content": "5 <channel|>6"},
     {"role": "tool", "content": "ignored"}, {"role": "system", "content": "Later system note"},
     {"role": "user", "content": "東京 😀 <bos>"}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<|channel>x<channel|>A"},
     {"role": "model", "content": " B<|channel>y"}, {"role": "user", "content": "C"}, {"role": "model", "content": "D"}],
]


def chat_cases(tj, template_path):
    from transformers import PreTrainedTokenizerFast
    template = open(template_path, encoding="utf-8").read()
    hf = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(tj)), bos_token="<bos>", eos_token="<eos>",
                                 pad_token="<pad>", unk_token="<unk>", mask_token="<mask>")
    hf.chat_template = template
    out = []
    for think in (False, True):
        for messages in CONVERSATIONS:
            for gen in (True, False):
                kwargs = {"enable_thinking": True} if think else {}
                text = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen, **kwargs)
                ids = hf.apply_chat_template(messages, tokenize=True, add_generation_prompt=gen, **kwargs)
                ids = ids["input_ids"] if not isinstance(ids, list) else ids
                case = {"messages": messages, "add_generation_prompt": gen, "text": text, "ids": list(ids)}
                if think:
                    case["enable_thinking"] = True
                out.append(case)
    meta = {"template": os.path.basename(template_path), "template_sha256": hashlib.sha256(template.encode("utf-8")).hexdigest()}
    return meta, out


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    vocab_path, template_path, folder = sys.argv[1:]
    tokens, types, merges = read_vocab(vocab_path)
    full = tokenizer_json(tokens, types, merges)
    ref = Tokenizer.from_str(json.dumps(full))
    check_llama_cpp_cases(ref, vocab_path)

    rng = random.Random(28)
    meta, chats = chat_cases(full, template_path)
    cases = encode_cases(ref, sample_texts(rng, 900), rng)
    tracer = merge_tracer(full)
    added = sorted((t["content"] for t in full["added_tokens"]), key=len, reverse=True)
    inputs = [c["text"] if "text" in c else bytes.fromhex(c["hex"]).decode("utf-8", "replace") for c in cases]
    for s in inputs + [c["text"] for c in chats]:
        tracer.text(s, added)
    small = pruned(full, tracer)
    check = Tokenizer.from_str(json.dumps(small))
    for s, want in zip(inputs + [c["text"] for c in chats], [c["ids"] for c in cases + chats]):
        if check.encode(s, add_special_tokens=False).ids != want:
            sys.exit(f"the pruned tokenizer encodes {s!r} otherwise than the full one")
    cases += decode_cases(ref, small, rng)

    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(small, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(folder, "cases.jsonl"), "w", encoding="utf-8") as f:
        f.write("\n".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases) + "\n")
    with open(os.path.join(folder, "chat.json"), "w", encoding="utf-8") as f:
        json.dump({"conversations": chats}, f, ensure_ascii=False, indent=1)
    with open(os.path.join(folder, "source.json"), "w", encoding="utf-8") as f:
        json.dump({"vocabulary": os.path.basename(vocab_path), "vocab_size": len(tokens), "merges": len(merges)} | meta, f, indent=1)
    total = sum(os.path.getsize(os.path.join(folder, n)) for n in ("tokenizer.json", "cases.jsonl", "chat.json", "source.json"))
    print(f"{folder}: {len(small['model']['vocab'])} of {len(tokens)} tokens and {len(small['model']['merges'])} of "
          f"{len(merges)} merges kept, {len(cases)} cases, {len(chats)} chats, {total} bytes in all")


if __name__ == "__main__":
    main()
