#!/usr/bin/python3
"""The small transformer behind dlm's shipped models, its attention masks, and its Hugging Face export.

One architecture serves all four models: token embedding, n pre-norm blocks (RMSNorm, attention with
rotary embeddings — rotate-half, theta 10000 — and optional grouped-query heads, RMSNorm, SwiGLU MLP),
a final RMSNorm and an untied output head; no biases anywhere. What differs is the attention mask:

    bidirectional   every position sees every valid position (the teacher, the CD4LM student)
    block_causal    the prompt sees the prompt; answer block b sees the prompt and blocks <= b,
                    blocks of B slots counted from the end of the prompt (the CDLM student)
    causal          position q sees positions <= q (the autoregressive baseline)

Export writes a model folder in LLaDA's layout (config.json with model_type "llada", weights named
model.transformer.*, bf16 safetensors, tokenizer.json) or, for the autoregressive baseline, in
Qwen2ForCausalLM's (model.layers.*, zero q/k/v biases). `load_folder` reads either back.

    /usr/bin/python3 tools/train/model.py --check DIR [DIR...]   # verify exported folders
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file


@dataclass
class ModelConfig:
    vocab_size: int          # embedding and output rows (>= the tokenizer's size)
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 4
    mlp_hidden: int = 384
    max_seq: int = 128
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads or self.n_heads % self.n_kv_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(f"inconsistent heads: d_model {self.d_model}, n_heads {self.n_heads}, "
                             f"n_kv_heads {self.n_kv_heads} (head size must be even and heads divisible by kv heads)")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def rope_tables(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin, [..., head_dim], for rotate-half rotary embeddings at `positions`."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim))
    angles = positions.float()[..., None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Block(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.c = c
        hd = c.head_dim
        self.attn_norm = RMSNorm(c.d_model, c.rms_eps)
        self.q_proj = nn.Linear(c.d_model, c.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(c.d_model, c.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(c.d_model, c.n_kv_heads * hd, bias=False)
        self.attn_out = nn.Linear(c.n_heads * hd, c.d_model, bias=False)
        self.ff_norm = RMSNorm(c.d_model, c.rms_eps)
        self.ff_proj = nn.Linear(c.d_model, c.mlp_hidden, bias=False)   # gate: SiLU branch
        self.up_proj = nn.Linear(c.d_model, c.mlp_hidden, bias=False)   # linear branch
        self.ff_out = nn.Linear(c.mlp_hidden, c.d_model, bias=False)    # down

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        c, (B, L, _) = self.c, x.shape
        h = self.attn_norm(x)
        q = self.q_proj(h).view(B, L, c.n_heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(B, L, c.n_kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(B, L, c.n_kv_heads, c.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if c.n_kv_heads != c.n_heads:  # query head h uses kv head h // group, as in LLaDA and Qwen2
            group = c.n_heads // c.n_kv_heads
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(c.head_dim)) + bias
        att = torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v
        x = x + self.attn_out(att.transpose(1, 2).reshape(B, L, -1))
        h = self.ff_norm(x)
        return x + self.ff_out(F.silu(self.ff_proj(h)) * self.up_proj(h))


class Transformer(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.c = c
        self.wte = nn.Embedding(c.vocab_size, c.d_model)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.ln_f = RMSNorm(c.d_model, c.rms_eps)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        std = 0.02
        for name, p in self.named_parameters():
            if p.dim() == 2:
                scale = 1.0 / math.sqrt(2 * self.c.n_layers) if name.endswith(("attn_out.weight", "ff_out.weight")) and "blocks" in name else 1.0
                nn.init.normal_(p, mean=0.0, std=std * scale)

    def forward(self, ids: torch.Tensor, allowed: torch.Tensor, select: torch.Tensor | None = None,
                positions: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, L, V] for `ids` [B, L] under the attention mask `allowed` [B, L, L] (query, key);
        with `select` (bool [B, L]) only the selected rows' logits, [n_selected, V]."""
        B, L = ids.shape
        if positions is None:
            positions = torch.arange(L, device=ids.device)
        cos, sin = rope_tables(positions, self.c.head_dim, self.c.rope_theta)
        bias = torch.zeros(allowed.shape, device=ids.device, dtype=torch.float32)
        bias.masked_fill_(~allowed, float("-inf"))
        bias = bias[:, None]  # broadcast over heads
        x = self.wte(ids)
        for block in self.blocks:
            x = block(x, cos, sin, bias)
        x = self.ln_f(x)
        if select is not None:
            x = x[select]
        return self.head(x)

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


# ----------------------------------------------------------------------------------------- masks

MASK_MODES = ("bidirectional", "block_causal", "causal")


def attention_mask(mode: str, prompt_len: torch.Tensor, valid_len: torch.Tensor, L: int, block: int = 0) -> torch.Tensor:
    """allowed[b, q, k] for a batch laid out as [prompt | answer slots | padding] per row.

    prompt_len, valid_len: [B] (valid = prompt + answer slots; keys past it are padding and never
    seen). Padding queries see themselves only, so their softmax stays finite."""
    device = prompt_len.device
    pos = torch.arange(L, device=device)
    key_ok = pos[None, :] < valid_len[:, None]                        # [B, L]
    if mode == "bidirectional":
        allowed = key_ok[:, None, :].expand(-1, L, -1)
    elif mode == "causal":
        allowed = (pos[None, :, None] >= pos[None, None, :]) & key_ok[:, None, :]
    elif mode == "block_causal":
        if block <= 0:
            raise ValueError(f"block_causal needs a block size > 0, got {block}")
        rel = pos[None, :] - prompt_len[:, None]                       # [B, L]
        blk = torch.where(rel < 0, torch.full_like(rel, -1), torch.div(rel, block, rounding_mode="floor"))
        allowed = (blk[:, None, :] <= blk[:, :, None]) & key_ok[:, None, :]
    else:
        raise ValueError(f"unknown mask mode '{mode}' (one of {', '.join(MASK_MODES)})")
    return allowed | torch.eye(L, dtype=torch.bool, device=device)[None]


# ---------------------------------------------------------------------------------------- export

def _llada_names(c: ModelConfig) -> dict[str, str]:
    """our parameter name -> LLaDA's."""
    names = {"wte.weight": "model.transformer.wte.weight", "ln_f.weight": "model.transformer.ln_f.weight",
             "head.weight": "model.transformer.ff_out.weight"}
    for i in range(c.n_layers):
        for part in ("attn_norm", "q_proj", "k_proj", "v_proj", "attn_out", "ff_norm", "ff_proj", "up_proj", "ff_out"):
            names[f"blocks.{i}.{part}.weight"] = f"model.transformer.blocks.{i}.{part}.weight"
    return names


_QWEN2_PARTS = {"attn_norm": "input_layernorm", "q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj",
                "v_proj": "self_attn.v_proj", "attn_out": "self_attn.o_proj", "ff_norm": "post_attention_layernorm",
                "ff_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj", "ff_out": "mlp.down_proj"}


def _qwen2_names(c: ModelConfig) -> dict[str, str]:
    names = {"wte.weight": "model.embed_tokens.weight", "ln_f.weight": "model.norm.weight", "head.weight": "lm_head.weight"}
    for i in range(c.n_layers):
        for ours, theirs in _QWEN2_PARTS.items():
            names[f"blocks.{i}.{ours}.weight"] = f"model.layers.{i}.{theirs}.weight"
    return names


def _qwen2_biases(c: ModelConfig) -> dict[str, int]:
    """Qwen2's q/k/v biases (we train none; they are exported as zeros): name -> length."""
    out = {}
    for i in range(c.n_layers):
        out[f"model.layers.{i}.self_attn.q_proj.bias"] = c.n_heads * c.head_dim
        out[f"model.layers.{i}.self_attn.k_proj.bias"] = c.n_kv_heads * c.head_dim
        out[f"model.layers.{i}.self_attn.v_proj.bias"] = c.n_kv_heads * c.head_dim
    return out


def llada_config(c: ModelConfig, special: dict[str, int], extra: dict) -> dict:
    cfg = {
        "activation_type": "silu", "alibi": False, "alibi_bias_max": 8.0, "architectures": ["LLaDAModelLM"],
        "attention_dropout": 0.0, "attention_layer_norm": False, "attention_layer_norm_with_affine": True,
        "bias_for_layer_norm": False, "block_group_size": 1, "block_type": "llama", "d_model": c.d_model,
        "embedding_dropout": 0.0, "embedding_size": c.vocab_size, "eos_token_id": special["<|endoftext|>"],
        "flash_attention": False, "include_bias": False, "include_qkv_bias": False, "init_cutoff_factor": None,
        "init_fn": "normal", "init_std": 0.02, "input_emb_norm": False, "layer_norm_type": "rms",
        "layer_norm_with_affine": True, "mask_token_id": special["<|mdm_mask|>"], "max_sequence_length": c.max_seq,
        "mlp_hidden_size": c.mlp_hidden, "mlp_ratio": max(1, round(c.mlp_hidden / c.d_model)), "model_type": "llada",
        "multi_query_attention": None, "n_heads": c.n_heads, "n_kv_heads": c.n_kv_heads, "n_layers": c.n_layers,
        "pad_token_id": special["<|pad|>"], "precision": "amp_bf16", "residual_dropout": 0.0, "rms_norm_eps": c.rms_eps,
        "rope": True, "rope_full_precision": True, "rope_theta": c.rope_theta, "scale_logits": False,
        "torch_dtype": "bfloat16", "use_cache": False, "vocab_size": c.vocab_size, "weight_tying": False,
    }
    cfg.update(extra)
    return cfg


def qwen2_config(c: ModelConfig, special: dict[str, int], extra: dict) -> dict:
    cfg = {
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": special["<|endoftext|>"],
        "eos_token_id": special["<|endoftext|>"], "hidden_act": "silu", "hidden_size": c.d_model,
        "initializer_range": 0.02, "intermediate_size": c.mlp_hidden, "max_position_embeddings": c.max_seq,
        "max_window_layers": c.n_layers, "model_type": "qwen2", "num_attention_heads": c.n_heads,
        "num_hidden_layers": c.n_layers, "num_key_value_heads": c.n_kv_heads, "rms_norm_eps": c.rms_eps,
        "rope_theta": c.rope_theta, "sliding_window": c.max_seq, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False, "vocab_size": c.vocab_size,
    }
    cfg.update(extra)
    return cfg


def export(model: Transformer, out_dir: Path, layout: str, tokenizer_json: Path, special: dict[str, int],
           extra: dict | None = None) -> None:
    """Write config.json, model.safetensors (bf16) and tokenizer.json to out_dir in `layout`
    ("llada" or "qwen2"). `extra` keys (dlm_block_length, dlm_gen_length, ...) join config.json."""
    c, extra = model.c, dict(extra or {})
    state = {k: v.detach().to("cpu", torch.float32) for k, v in model.state_dict().items()}
    if layout == "llada":
        names, cfg = _llada_names(c), llada_config(c, special, extra)
    elif layout == "qwen2":
        names, cfg = _qwen2_names(c), qwen2_config(c, special, extra)
    else:
        raise ValueError(f"unknown layout '{layout}' (llada or qwen2)")
    if set(names) != set(state):
        raise RuntimeError(f"parameter names do not map: {sorted(set(names) ^ set(state))}")
    tensors = {names[k]: v.to(torch.bfloat16).contiguous() for k, v in state.items()}
    if layout == "qwen2":
        tensors.update({n: torch.zeros(size, dtype=torch.bfloat16) for n, size in _qwen2_biases(c).items()})
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "model.safetensors").chmod(0o644)
    with open(out_dir / "config.json", "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    shutil.copyfile(tokenizer_json, out_dir / "tokenizer.json")


def config_from_hf(cfg: dict) -> tuple[ModelConfig, str]:
    if cfg.get("model_type") == "llada":
        return ModelConfig(vocab_size=cfg["embedding_size"], d_model=cfg["d_model"], n_layers=cfg["n_layers"],
                           n_heads=cfg["n_heads"], n_kv_heads=cfg["n_kv_heads"], mlp_hidden=cfg["mlp_hidden_size"],
                           max_seq=cfg["max_sequence_length"], rope_theta=cfg["rope_theta"],
                           rms_eps=cfg["rms_norm_eps"]), "llada"
    if cfg.get("model_type") == "qwen2":
        return ModelConfig(vocab_size=cfg["vocab_size"], d_model=cfg["hidden_size"], n_layers=cfg["num_hidden_layers"],
                           n_heads=cfg["num_attention_heads"], n_kv_heads=cfg["num_key_value_heads"],
                           mlp_hidden=cfg["intermediate_size"], max_seq=cfg["max_position_embeddings"],
                           rope_theta=cfg["rope_theta"], rms_eps=cfg["rms_norm_eps"]), "qwen2"
    raise ValueError(f"model_type {cfg.get('model_type')!r} is neither 'llada' nor 'qwen2'")


def load_folder(folder: Path, device: str = "cpu") -> tuple[Transformer, dict]:
    """A model folder written by `export` (either layout), as an f32 Transformer, and its config.json."""
    with open(folder / "config.json", encoding="utf-8") as f:
        cfg = json.load(f)
    c, layout = config_from_hf(cfg)
    names = _llada_names(c) if layout == "llada" else _qwen2_names(c)
    tensors = load_file(str(folder / "model.safetensors"))
    expected = set(names.values()) | (set(_qwen2_biases(c)) if layout == "qwen2" else set())
    if set(tensors) != expected:
        raise ValueError(f"{folder}/model.safetensors: tensor names differ from the {layout} layout: "
                         f"missing {sorted(expected - set(tensors))}, unexpected {sorted(set(tensors) - expected)}")
    for n in (_qwen2_biases(c) if layout == "qwen2" else {}):
        if tensors[n].float().abs().max() != 0:
            raise ValueError(f"{folder}: {n} is not zero; this trainer's models have no biases")
    model = Transformer(c)
    model.load_state_dict({ours: tensors[theirs].float() for ours, theirs in names.items()})
    return model.to(device), cfg


def check_folder(folder: Path) -> None:
    """Load an exported folder back and print what a reader would see."""
    model, cfg = load_folder(folder)
    tensors = load_file(str(folder / "model.safetensors"))
    dtypes = {str(t.dtype) for t in tensors.values()}
    assert dtypes == {"torch.bfloat16"}, f"{folder}: tensors are {dtypes}, not bf16"
    assert (folder / "tokenizer.json").is_file(), f"{folder}: tokenizer.json missing"
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert tok.get_vocab_size() <= model.c.vocab_size, "the tokenizer is larger than the embedding"
    c = model.c
    ids = torch.tensor([tok.encode("Tom has 3 apples. He buys 4 more. How many apples does he have now?").ids])
    L = ids.shape[1]
    mode = "causal" if cfg["model_type"] == "qwen2" else "bidirectional"
    logits = model(ids, attention_mask(mode, torch.tensor([L]), torch.tensor([L]), L))
    assert torch.isfinite(logits).all()
    size = (folder / "model.safetensors").stat().st_size
    print(f"{folder}: {cfg['model_type']} ({cfg['architectures'][0]}), {len(tensors)} tensors, {model.n_params():,} "
          f"parameters, model.safetensors {size / 1e6:.2f} MB bf16; d {c.d_model}, layers {c.n_layers}, heads "
          f"{c.n_heads}/{c.n_kv_heads}, mlp {c.mlp_hidden}, rows {c.vocab_size} (tokenizer {tok.get_vocab_size()}), "
          f"max_seq {c.max_seq}; dlm keys { {k: v for k, v in cfg.items() if k.startswith('dlm_')} }; forward ok")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", type=Path, nargs="+", required=True, help="exported model folders to verify")
    args = ap.parse_args(argv)
    for folder in args.check:
        check_folder(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["ModelConfig", "Transformer", "attention_mask", "export", "load_folder", "MASK_MODES", "asdict"]
