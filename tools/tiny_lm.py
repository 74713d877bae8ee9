"""A minimal torch implementation of the transformer block that docs/models.md documents (the one dlm's
CPU transformer runs), for running the reference decoders of tools/make_trajectory_fixtures.py on the
tiny fixture models under tests/data/models/ without their families' modeling code.

It reads a folder's config.json (LLaDA or Dream/Qwen2 format) and model.safetensors, computes in f32,
and answers the three calling conventions the reference generate functions use:

  LLaDA generate.py, CD4LM         model(x).logits, model(x, attention_mask=m).logits (batch of 2 for
                                   classifier-free guidance)
  Fast-dLLM v1 (prefix, dual)      model(x, use_cache=True).past_key_values; model(suffix,
                                   past_key_values=kv, use_cache=True); model(block,
                                   past_key_values=kv, use_cache=True, replace_position=r)
  Dream diffusion_generate         model(x, attention_mask, tok_idx).logits  (attention_mask "full")

Attention is bidirectional, as in every one of those decoders. Cached keys and values are those of
Fast-dLLM's LLaDA modeling: per layer (k, v) of shape [batch, kv_heads, length, head_dim], keys before
the rotary embedding (rotated at use, as there), and a replace_position call overwrites the cached rows
of the block in place. tools/make_trajectory_fixtures.py checks this model against the logits that
transformers wrote next to each model (tools/make_model_fixtures.py) before recording anything.
"""
import json
import os
from types import SimpleNamespace

import torch
from safetensors.torch import load_file


class TinyLM:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = json.load(f)
        c = self.config
        raw = {k: v.to(torch.float32) for k, v in load_file(os.path.join(folder, "model.safetensors")).items()}
        self.llada = c.get("model_type") == "llada"
        if self.llada:
            self.heads, self.kv_heads, self.layers = c["n_heads"], c["n_kv_heads"], c["n_layers"]
            self.eps, self.theta = c["rms_norm_eps"], c["rope_theta"]
            pre = "model.transformer."
            self.embed, self.norm = raw[pre + "wte.weight"], raw[pre + "ln_f.weight"]
            self.head = raw.get(pre + "ff_out.weight", self.embed)
            names = {"attn_norm": "attn_norm", "q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "attn_out",
                     "mlp_norm": "ff_norm", "gate": "ff_proj", "up": "up_proj", "down": "ff_out"}
            block = lambda i, part: f"{pre}blocks.{i}.{names[part]}"
        else:
            self.heads, self.kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
            self.layers, self.eps, self.theta = c["num_hidden_layers"], c["rms_norm_eps"], c["rope_theta"]
            self.embed, self.norm = raw["model.embed_tokens.weight"], raw["model.norm.weight"]
            self.head = raw.get("lm_head.weight", self.embed)
            names = {"attn_norm": "input_layernorm", "q": "self_attn.q_proj", "k": "self_attn.k_proj",
                     "v": "self_attn.v_proj", "o": "self_attn.o_proj", "mlp_norm": "post_attention_layernorm",
                     "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}
            block = lambda i, part: f"model.layers.{i}.{names[part]}"
        self.blocks = []
        for i in range(self.layers):
            w = {part: raw[block(i, part) + ".weight"] for part in names}
            w.update({f"{part}_bias": raw[block(i, part) + ".bias"] for part in ("q", "k", "v")
                      if block(i, part) + ".bias" in raw})
            self.blocks.append(w)
        self.head_dim = self.embed.shape[1] // self.heads
        self.device = torch.device("cpu")
        self.calls = []  # every forward: (input ids [B, T], first position, logits [B, T, V])

    # -- the block ---------------------------------------------------------------------------------
    def _rms(self, x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def _rope(self, x, positions):
        half = self.head_dim // 2
        inv = 1.0 / (self.theta ** (torch.arange(0, half, dtype=torch.float32) * 2 / self.head_dim))
        angles = positions.to(torch.float32)[:, None] * inv[None, :]
        cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rotated * sin

    def _linear(self, x, w, name):
        y = x @ w[name].T
        return y + w[name + "_bias"] if name + "_bias" in w else y

    def _forward(self, ids, q_positions, past=None, replace=None):
        """Logits [B, T, V] and the new per-layer (k, v) for the window ids [B, T] at q_positions."""
        b, t = ids.shape
        x = self.embed[ids]
        present = []
        for i, w in enumerate(self.blocks):
            h = self._rms(x, w["attn_norm"])
            q = self._linear(h, w, "q").view(b, t, self.heads, self.head_dim).transpose(1, 2)
            k = self._linear(h, w, "k").view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
            v = self._linear(h, w, "v").view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
            if past is not None and replace is not None:
                pk, pv = past[i]
                pk[:, :, replace] = k
                pv[:, :, replace] = v
                k, v = pk, pv
            elif past is not None:
                k, v = torch.cat([past[i][0], k], 2), torch.cat([past[i][1], v], 2)
            present.append((k, v))
            kr = self._rope(k, torch.arange(k.shape[2]))
            qr = self._rope(q, q_positions)
            group = self.heads // self.kv_heads
            kr, vr = kr.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
            scores = (qr @ kr.transpose(2, 3)) / self.head_dim ** 0.5
            att = torch.softmax(scores, -1) @ vr
            x = x + att.transpose(1, 2).reshape(b, t, -1) @ w["o"].T
            h = self._rms(x, w["mlp_norm"])
            x = x + (torch.nn.functional.silu(h @ w["gate"].T) * (h @ w["up"].T)) @ w["down"].T
        logits = self._rms(x, self.norm) @ self.head.T
        return logits, present

    # -- the calling conventions -------------------------------------------------------------------
    @torch.no_grad()
    def __call__(self, input_ids, attention_mask=None, tok_idx=None, past_key_values=None, use_cache=False,
                 replace_position=None, **unused):
        if tok_idx is not None:
            raise NotImplementedError("TinyLM: padded (tok_idx) Dream batches are not used by the fixtures")
        if isinstance(attention_mask, torch.Tensor) and not bool(attention_mask.all()):
            raise NotImplementedError("TinyLM: padding attention masks are not used by the fixtures")
        t = input_ids.shape[1]
        replace = None
        if past_key_values is not None and replace_position is not None:
            replace = replace_position[0].nonzero().flatten()
            assert replace.numel() == t and bool((replace[1:] - replace[:-1] == 1).all()), "one contiguous block"
            first = int(replace[0])
        else:
            first = 0 if past_key_values is None else past_key_values[0][0].shape[2]
        logits, present = self._forward(input_ids, torch.arange(first, first + t), past_key_values, replace)
        self.calls.append((input_ids.clone(), first, logits))
        return SimpleNamespace(logits=logits, past_key_values=present if use_cache else None)
