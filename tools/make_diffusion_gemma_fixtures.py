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

  trajectory_<name>.json           transformers' DiffusionGemmaForBlockDiffusion.generate() on the tiny
                                   model, its random draws replaced by dlm's (below): the answer, the
                                   forwards per canvas, each forward's draft (argmax canvas)

dlm's random numbers are counter-based (include/dlm/core/rng.hpp: Philox4x32-10 of (seed, stream,
forward, position, index)); the script computes them with numpy and gives them to the reference in
place of torch's: the noise a slot holds before forward k (initialize_canvas, also used to renoise) is
floor(u(seed, noise, k, p, 0) · vocab); a multinomial draw is the Gumbel-max over the tempered logits
with u(seed, sampling, k, p, i) for token i, which draws from the same distribution torch.multinomial
does. With the same numbers, the two decoders must produce the same tokens. The script refuses a case
whose decisions sit so close to a boundary (Gumbel top-2 gap, entropy-bound margin, stop-rule margin)
that f32 rounding differences between the two forwards could flip them.

Weights are drawn so that logits are peaked (fan-in scaled matrices, norms and scales near 1, the
encoder's and decoder's layer_scalar buffers different, as they are stored apart); the
self-conditioning MLP's smaller, since a random model's feedback through it otherwise multiplies the
f32 rounding differences of two implementations about tenfold per denoising step.
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
            elif "self_conditioning" in name:  # a damped feedback: f32 rounding must not grow step after step
                p.copy_(0.4 * torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
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


# -- dlm's random numbers (core/rng.hpp) --------------------------------------------------------------
import numpy as np

M0, M1, W0, W1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57), 0x9E3779B9, 0xBB67AE85
MASK32 = np.uint64(0xFFFFFFFF)


def philox_uniform(seed, stream, step, position, idx):
    """random_key{seed, stream, step, position}.uniform(i) for every i of the array idx."""
    idx = np.asarray(idx, dtype=np.uint64)
    c = [idx & MASK32, np.full_like(idx, position & 0xFFFFFFFF), np.full_like(idx, step & 0xFFFFFFFF), np.full_like(idx, stream)]
    k0, k1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    for _ in range(10):
        p0, p1 = M0 * c[0], M1 * c[2]
        hi0, lo0, hi1, lo1 = p0 >> np.uint64(32), p0 & MASK32, p1 >> np.uint64(32), p1 & MASK32
        c = [hi1 ^ c[1] ^ np.uint64(k0), lo1, hi0 ^ c[3] ^ np.uint64(k1), lo0]
        k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
    bits = ((c[0] << np.uint64(21)) ^ (c[1] >> np.uint64(11))) & np.uint64((1 << 53) - 1)
    return (bits.astype(np.float64) + 0.5) * 2.0 ** -53


SAMPLING, NOISE = 0, 4


def noise_tokens(seed, forward, positions, vocab):
    toks = [min(int(philox_uniform(seed, NOISE, forward, p, [0])[0] * vocab), vocab - 1) for p in positions]
    return torch.tensor(toks, dtype=torch.long)[None]


def trajectory(model, prompt, seed, greedy, gen, **gen_kwargs):
    """generate() with dlm's draws; returns the case's expectations."""
    from transformers.models.diffusion_gemma import generation_diffusion_gemma as G
    vocab, canvas = model.config.text_config.vocab_size, model.config.canvas_length
    st = {"forwards": 0, "block_start": None, "processed": None, "drafts": [], "margins": [], "per_block": []}
    saved = (G.EntropyBoundSampler.initialize_canvas, G.LinearTemperatureScheduleLogitsProcessor.__call__,
             torch.multinomial, model._prepare_denoiser_inputs, G.EntropyBoundSampler.accept_canvas)

    def initialize_canvas(self, batch_size, device):
        return noise_tokens(seed, st["forwards"], range(st["block_start"], st["block_start"] + canvas), vocab)

    def prepare(*a, **k):
        st["block_start"] = len(prompt) if st["block_start"] is None else st["block_start"] + canvas
        st["per_block"].append(0)
        return saved[3](*a, **k)

    def temperature(self, input_ids, scores, cur_step):
        out = saved[1](self, input_ids, scores, cur_step)
        st["processed"], st["step"] = out[0].detach().clone(), st["forwards"]
        st["forwards"] += 1
        st["per_block"][-1] += 1
        return out

    def multinomial(probs, num_samples=1, **_):
        z = st["processed"].double().numpy()
        picks = []
        for r in range(z.shape[0]):
            if greedy:
                g = z[r]
            else:
                g = z[r] - np.log(-np.log(philox_uniform(seed, SAMPLING, st["step"], st["block_start"] + r, np.arange(vocab))))
            top2 = np.sort(g)[-2:]
            st["margins"].append(("gumbel", float(top2[1] - top2[0])))
            picks.append(int(np.argmax(g)))
        st["drafts"].append([int(t) for t in np.argmax(z, axis=-1)])
        return torch.tensor(picks, dtype=torch.long)[:, None]

    def accept(self, current, denoiser, logits, cur_step):
        e = torch.distributions.Categorical(logits=logits).entropy()[0].double()
        s, _ = torch.sort(e)
        slack = (torch.cumsum(s, 0) - s - self.entropy_bound).abs().min().item()
        st["margins"].append(("entropy bound", slack))
        st["margins"].append(("mean entropy", abs(e.mean().item() - gen_kwargs.get("confidence_threshold", 0.005))))
        return saved[4](self, current, denoiser, logits, cur_step)

    inputs = []
    plain_forward = model.forward

    def forward(*a, **k):
        if k.get("decoder_input_ids") is not None:
            inputs.append([int(x) for x in k["decoder_input_ids"][0]])
        return plain_forward(*a, **k)

    model.forward = forward
    G.EntropyBoundSampler.initialize_canvas = initialize_canvas
    G.LinearTemperatureScheduleLogitsProcessor.__call__ = temperature
    G.EntropyBoundSampler.accept_canvas = accept
    torch.multinomial = multinomial
    model._prepare_denoiser_inputs = prepare
    try:
        out = model.generate(torch.tensor([prompt]), max_new_tokens=gen, eos_token_id=1, pad_token_id=0,
                             sampler_config=G.EntropyBoundSamplerConfig(entropy_bound=gen_kwargs["entropy_bound"]),
                             **{k: v for k, v in gen_kwargs.items() if k != "entropy_bound"})
    finally:
        (G.EntropyBoundSampler.initialize_canvas, G.LinearTemperatureScheduleLogitsProcessor.__call__, torch.multinomial,
         _, G.EntropyBoundSampler.accept_canvas) = saved
        del model._prepare_denoiser_inputs
        del model.forward
    for kind, m in st["margins"]:
        if m < 1e-4:
            raise SystemExit(f"a {kind} decision sits {m:.2e} from its boundary: f32 rounding could flip it; pick another case")
    seq = out.sequences[0, len(prompt):].tolist()
    return {"prompt": prompt, "seed": seed, "greedy": greedy, "gen_length": gen, "tokens": seq, "forwards": st["forwards"], "steps_per_block": st["per_block"],
            "drafts": st["drafts"], "inputs": inputs, "settings": gen_kwargs}


TRAJECTORIES = {
    "greedy": dict(seed=0, greedy=True, gen=32, entropy_bound=0.1, max_denoising_steps=6),
    "sampled": dict(seed=7, greedy=False, gen=32, entropy_bound=0.5, max_denoising_steps=6),
    "greedy_early_stop": dict(seed=11, greedy=True, gen=32, entropy_bound=20.0, max_denoising_steps=12,
                              confidence_threshold=10.0, t_min=0.2, t_max=0.5),
}


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
    prompt_ids = [int(t) for t in torch.randint(3, TEXT["vocab_size"], (9,), generator=torch.Generator().manual_seed(5))]
    for name, case in TRAJECTORIES.items():
        case = dict(case)
        t = trajectory(model, prompt_ids, case.pop("seed"), case.pop("greedy"), case.pop("gen"), **case)
        with open(os.path.join(folder, f"trajectory_{name}.json"), "w") as f:
            json.dump(t, f)
            f.write("\n")
        print(name, "forwards", t["forwards"], "tokens", t["tokens"])
    print("wrote", folder, {k: float(v.abs().max()) for k, v in cases.items()})


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/families/diffusion_gemma_tiny")
