#!/usr/bin/env python3
"""Writes tests/data/families/diffusion_gemma_tiny: a tiny random DiffusionGemma (transformers'
DiffusionGemmaForBlockDiffusion, the reference) and the logits of its forward modes, for
tests/test_diffusion_gemma.cpp.

  config.json, model.safetensors   save_pretrained of the tiny model (f32; the vision tower included,
                                   as a real checkpoint holds one)
  expected.json                    the prompt, the canvases, the cases below
  logits_<case>.f32                each case's canvas logits [canvas_length x vocab] after soft-capping

Cases (prompt of 13 tokens, longer than the sliding window 8, so the window matters):
  first    encoder over the prompt, decoder over canvas A, no self-conditioning
  selfcond decoder over canvas B with self-conditioning logits = first's logits / 0.7 (the processed
           logits generate() feeds back at temperature 0.7)
  second   encoder over canvas A appended to the prompt (a second block), decoder over canvas B
  chunked  as `second`, with the prompt encoded in two calls (5 + 8 tokens): equal to `second`

Weights are drawn so that logits are peaked (fan-in scaled matrices, norms and scales near 1, the
encoder's and decoder's layer_scalar buffers different, as they are stored apart).
Run (a venv with torch and transformers >= 5.11, which has DiffusionGemma):
  python3 -m venv /tmp/venv-dg && /tmp/venv-dg/bin/pip install torch transformers safetensors
  /tmp/venv-dg/bin/python tools/make_diffusion_gemma_fixtures.py tests/data/families/diffusion_gemma_tiny
"""
import json
import os
import sys

import torch
from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion
from transformers.cache_utils import DynamicCache

TEXT = dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, global_head_dim=32, num_global_key_value_heads=1, sliding_window=8,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"], num_experts=4, top_k_experts=2,
            moe_intermediate_size=24, max_position_embeddings=4096, final_logit_softcapping=30.0)
VISION = dict(model_type="gemma4_vision", hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
              num_key_value_heads=2, head_dim=8, position_embedding_size=64)
CANVAS = 16


def randomize(model, g):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "vision" in name:
                continue
            if name.endswith("norm.weight") or name.endswith("router.scale"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("per_expert_scale"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(1.5 * torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                b.copy_(0.6 + 0.8 * torch.rand(b.shape, generator=g))


def decode(model, cache, canvas, position, sc_logits=None):
    out = model(decoder_input_ids=canvas[None], past_key_values=cache, self_conditioning_logits=sc_logits,
                decoder_position_ids=torch.arange(position, position + CANVAS)[None])
    return out.logits[0]


def encode(model, cache, tokens, position):
    model.model.encoder(input_ids=tokens[None], past_key_values=cache,
                        position_ids=torch.arange(position, position + tokens.numel())[None])


def main(folder):
    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(0)
    cfg = DiffusionGemmaConfig(text_config=TEXT, vision_config=VISION, canvas_length=CANVAS)
    model = DiffusionGemmaForBlockDiffusion(cfg).eval()
    g = torch.Generator().manual_seed(28)
    randomize(model, g)
    model.save_pretrained(folder, safe_serialization=True)
    for extra in ("generation_config.json",):
        p = os.path.join(folder, extra)
        if os.path.exists(p):
            os.remove(p)

    prompt = torch.randint(3, TEXT["vocab_size"], (13,), generator=g)
    canvas_a = torch.randint(0, TEXT["vocab_size"], (CANVAS,), generator=g)
    canvas_b = torch.randint(0, TEXT["vocab_size"], (CANVAS,), generator=g)
    cases = {}
    with torch.no_grad():
        cache = DynamicCache(config=cfg.text_config)
        encode(model, cache, prompt, 0)
        first = decode(model, cache, canvas_a, 13)
        cases["first"] = first
        cases["selfcond"] = decode(model, cache, canvas_b, 13, (first / 0.7)[None])
        encode(model, cache, canvas_a, 13)
        cases["second"] = decode(model, cache, canvas_b, 29)
        cache2 = DynamicCache(config=cfg.text_config)
        encode(model, cache2, prompt[:5], 0)
        encode(model, cache2, prompt[5:], 5)
        encode(model, cache2, canvas_a, 13)
        cases["chunked"] = decode(model, cache2, canvas_b, 29)
    for name, logits in cases.items():
        logits.to(torch.float32).contiguous().numpy().tofile(os.path.join(folder, f"logits_{name}.f32"))
    expected = {
        "prompt": prompt.tolist(), "canvas_a": canvas_a.tolist(), "canvas_b": canvas_b.tolist(),
        "selfcond_temperature": 0.7, "canvas_length": CANVAS,
        "argmax": {k: v.argmax(-1).tolist() for k, v in cases.items()},
        "reference": "transformers " + __import__("transformers").__version__ + ", torch " + torch.__version__,
    }
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print("wrote", folder, {k: float(v.abs().max()) for k, v in cases.items()})


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/families/diffusion_gemma_tiny")
