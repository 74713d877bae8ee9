#!/usr/bin/python3
"""Train the byte-level BPE tokenizer of dlm's small models, in Qwen2's tokenizer.json format.

The file has exactly the structure of Qwen2's tokenizer.json: NFC normalizer, a Sequence pre-tokenizer
(Split on Qwen2's regex, behavior Isolated, then ByteLevel without prefix space and without its own
regex), a ByteLevel post-processor and decoder, and a BPE model with byte-level vocabulary and "a b"
merge strings. Numbers are cut into single digits by the regex, as in Qwen2. The special tokens
follow the BPE vocabulary, in this order:

    <|endoftext|>  EOS and the fill after an answer
    <|mdm_mask|>   the diffusion mask token
    <|im_start|>  <|im_end|>  <|pad|>

    /usr/bin/python3 tools/train/tokenizer.py                 # writes tools/data/tokenizer.json
    /usr/bin/python3 tools/train/tokenizer.py --check FILE    # re-reads FILE and round-trips the test set
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # deterministic, and polite on a shared machine
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import gsm_synth  # noqa: E402

QWEN2_SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                     r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL_TOKENS = ["<|endoftext|>", "<|mdm_mask|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
EOS, MASK, PAD = "<|endoftext|>", "<|mdm_mask|>", "<|pad|>"
DEFAULT_PATH = gsm_synth.DATA_DIR / "tokenizer.json"
DEFAULT_VOCAB = 768          # upper bound (BPE + special); the merges run out first (min frequency 2)
DEFAULT_TRAIN_PROBLEMS = 20000


def _byte_level() -> dict:
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}


def train(texts: list[str], vocab_size: int = DEFAULT_VOCAB) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(SPECIAL_TOKENS), min_frequency=2,
                                  show_progress=False, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_special_tokens(SPECIAL_TOKENS)
    return tok


def to_qwen2_json(tok: Tokenizer) -> dict:
    """The tokenizer as a dict laid out exactly like Qwen2's tokenizer.json."""
    raw = json.loads(tok.to_str())
    model = raw["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    added = [{"id": t["id"], "content": t["content"], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t in raw["added_tokens"]]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT_REGEX}, "behavior": "Isolated", "invert": False},
            _byte_level(),
        ]},
        "post_processor": _byte_level(),
        "decoder": _byte_level(),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "vocab": model["vocab"], "merges": merges},
    }


def save(tok: Tokenizer, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(to_qwen2_json(tok), f, ensure_ascii=False, indent=2)
        f.write("\n")


def load(path: Path = DEFAULT_PATH) -> Tokenizer:
    return Tokenizer.from_file(str(path))


def special_ids(tok: Tokenizer) -> dict[str, int]:
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    missing = [t for t, i in ids.items() if i is None]
    if missing:
        raise ValueError(f"tokenizer lacks special tokens {missing}")
    return ids


def check(path: Path) -> None:
    """Re-read `path`, check its layout, and round-trip every test problem."""
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    assert j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == QWEN2_SPLIT_REGEX
    assert j["model"]["type"] == "BPE" and all(isinstance(m, str) for m in j["model"]["merges"])
    tok = load(path)
    ids = special_ids(tok)
    n_bpe = len(j["model"]["vocab"])
    assert sorted(ids.values()) == list(range(n_bpe, n_bpe + len(SPECIAL_TOKENS))), "special tokens must follow the BPE vocabulary"
    problems = gsm_synth.read_jsonl(gsm_synth.DATA_DIR / "test.jsonl")
    lengths = []
    for p in problems:
        for text in (p["question"], p["answer"]):
            enc = tok.encode(text, add_special_tokens=False)
            assert tok.decode(enc.ids, skip_special_tokens=False) == text, text
        lengths.append((len(tok.encode(p["question"]).ids), len(tok.encode(p["answer"]).ids)))
    q = [a for a, _ in lengths]
    a = [b for _, b in lengths]
    s = [x + y for x, y in lengths]
    print(f"{path}: {tok.get_vocab_size()} tokens ({n_bpe} BPE + {len(SPECIAL_TOKENS)} special: {ids})")
    print(f"test set: question {min(q)}-{max(q)} tokens (mean {sum(q)/len(q):.1f}), answer {min(a)}-{max(a)} "
          f"(mean {sum(a)/len(a):.1f}), question+answer {min(s)}-{max(s)} (mean {sum(s)/len(s):.1f})")
    print("example:", [tok.id_to_token(i) for i in tok.encode(problems[0]["question"] + " " + problems[0]["answer"]).ids])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_PATH)
    ap.add_argument("--vocab", type=int, default=DEFAULT_VOCAB, help="total size, special tokens included")
    ap.add_argument("--problems", type=int, default=DEFAULT_TRAIN_PROBLEMS, help="train problems to learn from")
    ap.add_argument("--check", type=Path, help="only check an existing tokenizer.json")
    args = ap.parse_args(argv)
    if args.check:
        check(args.check)
        return 0
    texts = []
    for p in gsm_synth.split("train", args.problems):
        texts += [p["question"], p["answer"]]
    save(train(texts, args.vocab), args.out)
    check(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
