#!/usr/bin/python3
"""Builds the tiny reference models under tests/data/models/ that tests/test_transformer.cpp checks
dlm's CPU transformer against.

Each model is a random-weight Hugging Face transformers model run in f32 on the CPU:

  llada_tiny  transformers' Llama with bidirectional attention, weights renamed to LLaDA's names,
              config.json in LLaDA's format, untied head, model.safetensors in f32.
  dream_tiny  transformers' Qwen2 (q/k/v biases) with bidirectional attention, config.json in
              Dream's format, tied head, model.safetensors in bf16 (the reference runs on the
              bf16-rounded weights, so dlm's bf16 -> f32 conversion is tested too).

Attention masks are passed to transformers as additive 4-D float masks (0 = may attend, the
dtype's minimum = may not), which transformers >= 4.42 adds to the attention scores as they are, so
the same run gives the bidirectional logits and the block-causal (llada_tiny) or causal (dream_tiny)
ones. Before writing anything the script checks that the mask was applied as meant: the prompt rows
of the block-causal case must equal a run on the prompt alone, the rows up to block 0's end a run on
prompt + block 0, and an explicit causal mask transformers' own causal attention. Each folder gets expected.json (input ids, layout,
cases) and one raw little-endian f32 file of [tokens x vocab] logits per case.

Supported: transformers 4.42 or newer (checked: 5.24.0 and 4.57.6), torch 2.x (checked: 2.15.0).
transformers 4.41 and older read a 4-D mask as 1 = attend and invert it, so they are refused. Set
up once (CPU wheels from PyPI, about 1 GB):
    python3 -m venv build/venv && build/venv/bin/pip install torch transformers safetensors numpy
Usage:
    build/venv/bin/python tools/make_model_fixtures.py [output_dir]   # default tests/data/models
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file

MIN_TRANSFORMERS = (4, 42)


def check_versions():
    """Refuses a transformers that reads 4-D masks differently; see the module docstring."""
    def version_tuple(text):
        parts = []
        for piece in text.split("+")[0].split(".")[:2]:
            digits = "".join(ch for ch in piece if ch.isdigit())
            parts.append(int(digits or 0))
        return tuple(parts)
    if version_tuple(transformers.__version__) < MIN_TRANSFORMERS:
        sys.exit(f"make_model_fixtures.py: transformers {transformers.__version__} is too old: it reads a 4-D "
                 f"attention mask as 1 = attend; this script passes additive masks, which transformers "
                 f">= {MIN_TRANSFORMERS[0]}.{MIN_TRANSFORMERS[1]} applies as they are. "
                 f"Install a current one: pip install -U transformers")
    if version_tuple(torch.__version__) < (2, 0):
        sys.exit(f"make_model_fixtures.py: torch {torch.__version__} is too old; torch 2.x is needed")

VOCAB, HIDDEN, INTER, HEADS, KV_HEADS = 300, 48, 80, 6, 2
MASK_ID = 299


def randomize(model, generator):
    """Weights large enough that logits are peaked: unit-variance embeddings, fan-in scaled matrices,
    norms near 1, small biases."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=generator))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=generator))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=generator))
            else:
                p.copy_(torch.randn(p.shape, generator=generator) / p.shape[1] ** 0.5)


def round_to_bf16(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def run(model, ids, allowed):
    """Logits [T, V] with allowed[q][k] (bool [T, T]) as the attention mask, or causal if None. The
    mask goes in additive form: 0 where a query may attend, the dtype's minimum where it may not."""
    with torch.no_grad():
        if allowed is None:
            out = model(input_ids=ids[None, :])
        else:
            additive = torch.zeros(allowed.shape, dtype=torch.float32)
            additive.masked_fill_(~allowed, torch.finfo(torch.float32).min)
            out = model(input_ids=ids[None, :], attention_mask=additive[None, None, :, :])
    return out.logits[0].to(torch.float32).contiguous()


def check_rope_theta(cfg, want):
    """transformers 5 keeps the rotary base in rope_parameters, 4.x in rope_theta: either must hold it."""
    params = getattr(cfg, "rope_parameters", None) or {}
    got = params.get("rope_theta", getattr(cfg, "rope_theta", None))
    if got != want or params.get("rope_type", "default") != "default":
        sys.exit(f"make_model_fixtures.py: transformers {transformers.__version__} built rope {params or got}, "
                 f"not the default rope with theta {want}")


def full(n):
    return torch.ones(n, n, dtype=torch.bool)


def check_rows(name, got, want, tol=1e-4):
    """The mask self-check: rows under a mask must equal a run on a canvas cut before the keys the mask
    hides from them in every layer, and an explicit causal mask must equal transformers' own causal run."""
    diff = (got - want).abs().max().item()
    if not diff <= tol:
        sys.exit(f"make_model_fixtures.py: {name}: the attention mask was not applied as meant (rows differ by "
                 f"{diff:.3g}); transformers {transformers.__version__} may read 4-D masks differently")


def block_causal(prompt, total, block):
    q = torch.arange(total)[:, None]
    k = torch.arange(total)[None, :]
    end = torch.where(q < prompt, torch.full_like(q, prompt), prompt + ((q - prompt) // block + 1) * block)
    return k < end


def write_case_files(folder, name, logits):
    path = os.path.join(folder, f"logits_{name}.f32")
    with open(path, "wb") as f:
        f.write(logits.numpy().astype("<f4").tobytes())
    return os.path.basename(path)


def make_llada(folder, generator):
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=2,
        num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, rope_theta=500000.0, rms_norm_eps=1e-5,
        max_position_embeddings=256, tie_word_embeddings=False, attention_bias=False, hidden_act="silu")
    cfg._attn_implementation = "eager"
    check_rope_theta(cfg, 500000.0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    randomize(model, generator)

    rename = {
        "model.embed_tokens.weight": "model.transformer.wte.weight",
        "model.norm.weight": "model.transformer.ln_f.weight",
        "lm_head.weight": "model.transformer.ff_out.weight",
    }
    layer_parts = {
        "input_layernorm": "attn_norm", "self_attn.q_proj": "q_proj", "self_attn.k_proj": "k_proj",
        "self_attn.v_proj": "v_proj", "self_attn.o_proj": "attn_out", "post_attention_layernorm": "ff_norm",
        "mlp.gate_proj": "ff_proj", "mlp.up_proj": "up_proj", "mlp.down_proj": "ff_out",
    }
    tensors = {}
    for name, t in model.state_dict().items():
        if name in rename:
            new = rename[name]
        else:
            _, _, layer, rest = name.split(".", 3)
            part, kind = rest.rsplit(".", 1)
            new = f"model.transformer.blocks.{layer}.{layer_parts[part]}.{kind}"
        tensors[new] = t.contiguous()
    save_file(tensors, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})

    config = {
        "architectures": ["LLaDAModelLM"], "model_type": "llada", "activation_type": "silu", "alibi": False,
        "attention_layer_norm": False, "bias_for_layer_norm": False, "block_type": "llama", "d_model": HIDDEN,
        "embedding_size": VOCAB, "eos_token_id": 1, "include_bias": False, "include_qkv_bias": False,
        "input_emb_norm": False, "layer_norm_type": "rms", "layer_norm_with_affine": True, "mask_token_id": MASK_ID,
        "max_sequence_length": 256, "mlp_hidden_size": INTER, "mlp_ratio": 4, "n_heads": HEADS, "n_kv_heads": KV_HEADS,
        "n_layers": 2, "pad_token_id": 0, "rms_norm_eps": 1e-5, "rope": True, "rope_theta": 500000.0,
        "scale_logits": False, "vocab_size": VOCAB, "weight_tying": False,
    }
    prompt, gen, block = 8, 16, 4
    ids = torch.randint(0, VOCAB - 1, (prompt + gen,), generator=generator)
    ids[prompt + 3:prompt + 9] = MASK_ID
    total = prompt + gen
    cases = {
        "bidirectional": run(model, ids, full(total)),
        "block_causal": run(model, ids, block_causal(prompt, total, block)),
    }
    check_rows("llada_tiny prompt rows", cases["block_causal"][:prompt], run(model, ids[:prompt], full(prompt)))
    first = prompt + block
    check_rows("llada_tiny block 0 rows", cases["block_causal"][:first], run(model, ids[:first], block_causal(prompt, first, block)))
    return config, ids, prompt, gen, block, cases


def make_dream(folder, generator):
    cfg = transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=3,
        num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, rope_theta=10000.0, rms_norm_eps=1e-6,
        max_position_embeddings=256, tie_word_embeddings=True, use_sliding_window=False, hidden_act="silu")
    cfg._attn_implementation = "eager"
    check_rope_theta(cfg, 10000.0)
    model = transformers.Qwen2ForCausalLM(cfg).eval()
    randomize(model, generator)
    round_to_bf16(model)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(), "head must be tied"
    tensors = {k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(tensors, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})

    config = {
        "architectures": ["DreamModel"], "model_type": "Dream", "bos_token_id": 3, "eos_token_id": 2,
        "hidden_act": "silu", "hidden_size": HIDDEN, "intermediate_size": INTER, "mask_token_id": MASK_ID,
        "max_position_embeddings": 256, "num_attention_heads": HEADS, "num_hidden_layers": 3,
        "num_key_value_heads": KV_HEADS, "pad_token_id": 0, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "use_sliding_window": False, "vocab_size": VOCAB,
    }
    prompt, gen, block = 8, 12, 4
    ids = torch.randint(0, VOCAB - 1, (prompt + gen,), generator=generator)
    ids[prompt + 2:prompt + 7] = MASK_ID
    total = prompt + gen
    cases = {
        "bidirectional": run(model, ids, full(total)),
        "causal": run(model, ids, None),
    }
    check_rows("dream_tiny causal", cases["causal"], run(model, ids, torch.tril(full(total))))
    return config, ids, prompt, gen, block, cases


def main():
    check_versions()
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "data", "models")
    generator = torch.Generator().manual_seed(20240611)
    for name, make in (("llada_tiny", make_llada), ("dream_tiny", make_dream)):
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        config, ids, prompt, gen, block, cases = make(folder, generator)
        first = next(iter(cases.values()))
        for case, logits in cases.items():  # the masks must matter, or the test proves nothing
            if logits is not first:
                assert (logits[0] - first[0]).abs().max() > 1e-3, f"{name}: case {case} equals the first case"
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f, indent=2, sort_keys=True)
            f.write("\n")
        expected = {
            "generator": f"tools/make_model_fixtures.py (torch {torch.__version__}, transformers {transformers.__version__})",
            "input_ids": ids.tolist(), "prompt_length": prompt, "gen_length": gen, "block_length": block,
            "vocab_size": VOCAB,
            "cases": {case: write_case_files(folder, case, logits) for case, logits in cases.items()},
        }
        with open(os.path.join(folder, "expected.json"), "w") as f:
            json.dump(expected, f, indent=2)
            f.write("\n")
        print(f"{folder}: {len(ids)} tokens, cases {list(cases)}")


if __name__ == "__main__":
    main()
