#!/usr/bin/python3
"""Writes the tiny model folder the command-line tests run: tests/data/cli/{tokenizer.json,
config.json, tokenizer_config.json}. The weights are tests/data/models/llada_tiny/model.safetensors
(random, vocabulary 300), which the test build copies beside these files, so nothing large is kept
twice.

The tokenizer is the shipped models' byte-level BPE format (tools/train/tokenizer.py: Qwen2's
tokenizer.json layout) trained on eval.jsonl down to 300 ids: 256 bytes, 39 merges, then
<|endoftext|> 295 (EOS), <|mdm_mask|> 296 (mask), <|im_start|> 297, <|im_end|> 298, <|pad|> 299.
tokenizer_config.json carries a ChatML chat template, so --chat has something to apply.

    /usr/bin/python3 tests/data/cli/make_cli_model.py      # needs: pip install tokenizers
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "tools" / "train"))
import tokenizer as T  # noqa: E402  (tools/train/tokenizer.py)

VOCAB = 300

texts = []
for line in (HERE / "eval.jsonl").read_text(encoding="utf-8").splitlines():
    p = json.loads(line)
    texts += [p["question"], p["answer"]]
tok = T.train(texts, VOCAB)
T.save(tok, HERE / "tokenizer.json")
ids = T.special_ids(tok)
assert tok.get_vocab_size() == VOCAB and ids[T.MASK] < VOCAB, (tok.get_vocab_size(), ids)

config = json.loads((REPO / "tests/data/models/llada_tiny/config.json").read_text())
config.update({"eos_token_id": ids[T.EOS], "mask_token_id": ids[T.MASK], "pad_token_id": ids[T.PAD],
               "dlm_gen_length": 24, "dlm_block_length": 8})
(HERE / "config.json").write_text(json.dumps(config, indent=2) + "\n")

chatml = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
(HERE / "tokenizer_config.json").write_text(json.dumps({"chat_template": chatml, "eos_token": T.EOS}, indent=2) + "\n")
print(f"{HERE}: {tok.get_vocab_size()} tokens, special {ids}")
