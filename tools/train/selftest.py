#!/usr/bin/python3
"""Quick checks of the training code (about ten seconds on a CPU; no trained model needed).

    /usr/bin/python3 tools/train/selftest.py

- attention masks: block-causal and causal rows do not change when later blocks / positions change,
  block-causal prompt rows see only the prompt, padding is never seen;
- export and load_folder round-trip both layouts to the same logits (bf16 weights);
- the LLaDA decoder with one token per step commits every slot exactly once, in step order inside
  each block, and the recorded top-k distribution holds the committed token first;
- block rows: one whole block of each row's slots, every slot after it, and nested masks inside it;
- the data splits are disjoint and the tokenizer round-trips them.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

import common as C
import decode
import gsm_synth
import model as M
from train_cd4lm import nested_masks
from train_cdlm import block_ranks


def check_masks() -> None:
    torch.manual_seed(0)
    c = M.ModelConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, mlp_hidden=64)
    m = M.Transformer(c).eval()
    P, G, B = torch.tensor([5, 7]), 16, 4
    L = int(P.max()) + G
    ids = torch.randint(0, 60, (2, L))
    V = P + G
    for mode in ("block_causal", "causal"):
        allowed = M.attention_mask(mode, P, V, L, B)
        base = m(ids, allowed)
        for cut in (0, 1, 2, 3):  # change everything after block `cut`
            changed = ids.clone()
            for r in range(2):
                start = int(P[r]) + (cut + 1) * B if mode == "block_causal" else int(P[r]) + cut * B + 1
                changed[r, start:] = torch.randint(0, 60, (L - start,))
            out = m(changed, allowed)
            for r in range(2):
                keep = int(P[r]) + (cut + 1) * B if mode == "block_causal" else int(P[r]) + cut * B + 1
                assert torch.allclose(base[r, :keep], out[r, :keep], atol=1e-5), (mode, cut, r)
    bc = M.attention_mask("block_causal", P, V, L, B)
    assert not bc[0, :5, 5:].any() and bc[0, :5, :5].all(), "block-causal prompt rows must see exactly the prompt"
    assert bc[0, 5 + B, : 5 + 2 * B].all() and not bc[0, 5 + B, 5 + 2 * B:].any()
    bi = M.attention_mask("bidirectional", P, V, L)
    assert not bi[0, :int(V[0]), int(V[0]):].any(), "padding keys must be invisible"
    print("masks: ok")


def check_export() -> None:
    torch.manual_seed(1)
    tok, sp = C.load_tokenizer(C.T.DEFAULT_PATH)
    c = M.ModelConfig(vocab_size=C.embedding_rows(tok), d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, mlp_hidden=64)
    m = M.Transformer(c).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    ids = torch.tensor([tok.encode("Tom has 3 apples. He buys 4 more.").ids])
    L = ids.shape[1]
    special = C.T.special_ids(tok)
    with tempfile.TemporaryDirectory() as d:
        for layout, mode in (("llada", "bidirectional"), ("qwen2", "causal")):
            out = Path(d) / layout
            M.export(m, out, layout, C.T.DEFAULT_PATH, special, {"dlm_block_length": 8})
            m2, cfg = M.load_folder(out)
            allowed = M.attention_mask(mode, torch.tensor([L]), torch.tensor([L]), L)
            assert torch.equal(m(ids, allowed), m2.eval()(ids, allowed)), layout
            assert cfg["dlm_block_length"] == 8
    print("export round trip (llada, qwen2): ok")


def check_decoder() -> None:
    torch.manual_seed(2)
    c = M.ModelConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=4, mlp_hidden=64)
    m = M.Transformer(c)
    prompts = [[1, 2, 3], [4, 5, 6, 7, 8], [9]]
    G, B = 16, 4
    g = decode.diffusion_generate(m, prompts, gen_length=G, block=B, mask_mode="bidirectional", mask_id=63, eos_id=62,
                                  pad_id=61, steps_per_block=B, record_topk=3)
    assert (g.forwards == G).all(), g.forwards
    assert (g.commit_step >= 0).all() and all(sorted(row) == list(range(G)) for row in g.commit_step.tolist())
    for row in g.commit_step.tolist():  # block b is committed by forwards b*B .. b*B + B - 1
        for b in range(G // B):
            assert sorted(row[b * B:(b + 1) * B]) == list(range(b * B, (b + 1) * B))
    assert torch.equal(g.topk_id[..., 0].long(), g.tokens), "the committed token is the top-1 of its distribution"
    ranks = block_ranks(g.commit_step, B)
    assert all(sorted(r[b * B:(b + 1) * B]) == list(range(B)) for r in ranks.tolist() for b in range(G // B))
    g2 = decode.diffusion_generate(m, prompts, gen_length=G, block=B, mask_mode="block_causal", mask_id=63, eos_id=62,
                                   pad_id=61, threshold=0.0, stop_after_eos_block=True)
    assert (g2.forwards <= G // B).all(), "threshold 0 commits a whole block per forward"
    g3 = decode.ar_generate(m, prompts, gen_length=G, eos_id=62, pad_id=61)
    assert (g3.forwards <= G).all()
    print("decoders: ok")


def check_block_rows() -> None:
    torch.manual_seed(0)
    G, B = 48, 8
    P = torch.randint(10, 30, (64,))
    L = int(P.max()) + G
    pos = torch.arange(L)[None]
    slots = (pos >= P[:, None]) & (pos < (P + G)[:, None])
    cv = C.Canvas(torch.zeros(64, L, dtype=torch.long), P, P + G, slots)
    current, future = C.block_windows(cv, G, B)
    assert (current.sum(1) == B).all(), "a block row's current block must hold exactly one block of slots"
    assert not (current & future).any() and not ((current | future) & ~slots).any()
    first = current.float().argmax(1)
    assert ((first - P) % B == 0).all(), "blocks are counted from the end of the prompt"
    assert (future.sum(1) == P + G - first - B).all(), "every slot after the block is future"
    s_mask, t_mask = nested_masks(current, B, hi=1.0 + 1.0 / B)
    assert not (t_mask & ~s_mask).any() and not (s_mask & ~current).any(), "teacher mask inside student mask inside block"
    assert (s_mask.sum(1) >= 2).all() and (s_mask.sum(1) <= B).all()
    print("block rows: ok")


def check_data() -> None:
    tok, _ = C.load_tokenizer(C.T.DEFAULT_PATH)
    test = gsm_synth.read_jsonl(gsm_synth.DATA_DIR / "test.jsonl")
    val = gsm_synth.read_jsonl(gsm_synth.DATA_DIR / "val.jsonl")
    train = gsm_synth.split("train", 20000)
    found = gsm_synth.check()  # every committed split against the others and the whole train pool
    assert not found, "; ".join(found)
    longest = max(len(tok.encode(p["answer"]).ids) for p in train)
    assert longest < C.GEN_LENGTH, f"an answer of {longest} tokens does not fit {C.GEN_LENGTH} slots with its EOS"
    print(f"data: {len(test)} test, {len(val)} val, {gsm_synth.SPLIT_SIZES['test2']} test2, {gsm_synth.TRAIN_POOL} train "
          f"problems disjoint; longest train answer {longest} tokens: ok")


def main() -> int:
    torch.set_num_threads(1)
    check_masks()
    check_export()
    check_decoder()
    check_block_rows()
    check_data()
    print("selftest passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
