"""Shared by tools/make_family_fixtures.py's family builders: loading a reference checkout with the
CPU and transformers-5 shims its docstring lists, random weights, writing checkpoints, logits and
trajectories, and recording what each reference forward committed."""
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import types
import typing

import torch

VOCAB, MASK, EOS, EOS2 = 300, 299, 297, 296


# -- loading the references ------------------------------------------------------------------------
def describe(path):
    """Where a reference came from: the file relative to its git checkout, and the commit when known."""
    root = os.path.dirname(os.path.abspath(path))
    try:
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                             check=True).stdout.strip()
        commit = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
        return {"file": os.path.relpath(path, top), "commit": commit}
    except (subprocess.CalledProcessError, FileNotFoundError):
        return {"file": os.path.basename(path), "commit": "unknown (not a git checkout)"}


def install_shims():
    """The CPU stand-ins listed in the module docstring (transformers is imported first: it probes for
    flash_attn at import time and must find none)."""
    import transformers.activations  # noqa: F401
    import transformers.modeling_utils  # noqa: F401
    import transformers.utils
    if not hasattr(transformers.utils, "LossKwargs"):
        class LossKwargs(typing.TypedDict, total=False):
            num_items_in_batch: typing.Optional[torch.Tensor]
        transformers.utils.LossKwargs = LossKwargs

    def rms_norm_fn(x, weight, bias=None, eps=1e-6, **_):
        assert bias is None
        x32 = x.float()
        return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)

    def flash_attn_func(q, k, v, causal=False, softmax_scale=None, **_):  # [b, l, h, d] like flash-attn
        out = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                               is_causal=causal, scale=softmax_scale, enable_gqa=True)
        return out.transpose(1, 2)

    fa = types.ModuleType("flash_attn")
    fa.flash_attn_func = flash_attn_func
    fa.flash_attn_varlen_func = None
    mods = {"flash_attn": fa}
    for name in ("flash_attn.ops", "flash_attn.ops.triton", "flash_attn.ops.triton.layer_norm", "flash_attn.bert_padding"):
        mods[name] = types.ModuleType(name)
    mods["flash_attn.ops.triton.layer_norm"].rms_norm_fn = rms_norm_fn
    for f in ("index_first_axis", "pad_input", "unpad_input"):
        setattr(mods["flash_attn.bert_padding"], f, None)
    sys.modules.update(mods)
    from transformers.cache_utils import DynamicCache
    if not hasattr(DynamicCache, "__getitem__"):  # transformers 5: cache[layer] -> (keys, values) is gone
        DynamicCache.__getitem__ = lambda self, i: (self.layers[i].keys, self.layers[i].values)
    import transformers.utils.import_utils as import_utils
    if not hasattr(import_utils, "is_torch_fx_available"):  # gone in transformers 5; LLaDA2 asks
        import_utils.is_torch_fx_available = lambda: False
    import transformers.modeling_rope_utils as rope
    if "default" not in rope.ROPE_INIT_FUNCTIONS:  # transformers 5 moved plain RoPE out of the table
        def default_rope(config, device=None, *_, **__):
            dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
            dim = int(dim * getattr(config, "partial_rotary_factor", 1.0))
            inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
            return inv_freq.to(device), 1.0
        rope.ROPE_INIT_FUNCTIONS["default"] = default_rope
    try:
        import transformers.modeling_attn_mask_utils  # noqa: F401
    except ImportError:  # transformers 5 removed it; SDAR's forward never calls it (_update_causal_mask is unused)
        stub = types.ModuleType("transformers.modeling_attn_mask_utils")
        stub.AttentionMaskConverter = type("AttentionMaskConverter", (), {})

        def prepare_4d(mask, *_, **__):  # the scripts pass 4-D masks, which these helpers return as they are
            if mask is not None and mask.dim() != 4:
                raise NotImplementedError("make_family_fixtures.py passes 4-D attention masks only")
            return mask
        stub._prepare_4d_causal_attention_mask = prepare_4d
        stub._prepare_4d_causal_attention_mask_for_sdpa = prepare_4d
        sys.modules[stub.__name__] = stub


def import_package(folder, package, modules):
    """Imports `modules` of `folder` as submodules of a made-up package (their relative imports work)."""
    pkg = types.ModuleType(package)
    pkg.__path__ = [folder]
    sys.modules[package] = pkg
    out = []
    for m in modules:
        spec = importlib.util.spec_from_file_location(f"{package}.{m}", os.path.join(folder, m + ".py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        out.append(module)
    return out


def import_file(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def greedy_multinomial():
    """torch.multinomial(probs, 1) -> argmax, for the duration of a reference generate call."""
    saved = torch.multinomial
    torch.multinomial = lambda probs, num_samples=1, **_: probs.argmax(dim=-1, keepdim=True)
    try:
        yield
    finally:
        torch.multinomial = saved


# -- weights and outputs ---------------------------------------------------------------------------
def randomize(model, generator):
    """Peaked logits: unit-variance embeddings, fan-in scaled matrices (x2), norms near 1."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=generator))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=generator))
            elif "embed" in name:
                p.copy_(torch.randn(p.shape, generator=generator))
            else:
                p.copy_(2.0 * torch.randn(p.shape, generator=generator) / p.shape[-1] ** 0.5)


def save_checkpoint(model, folder, dtype=torch.float32, rename=None):
    """model.safetensors of the model's state dict (passed through `rename` when given)."""
    from safetensors.torch import save_file
    state = rename(model.state_dict()) if rename else model.state_dict()
    tensors = {k: v.detach().to(dtype).contiguous() for k, v in state.items()}
    save_file(tensors, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def write_logits(folder, name, logits):
    path = os.path.join(folder, f"logits_{name}.f32")
    logits.detach().to(torch.float32).contiguous().numpy().tofile(path)
    return os.path.basename(path)


def block_diffusion_mask(total, block):
    """The references' mask: tril(ones(blocks, blocks)) repeated `block` times along both axes."""
    blocks = (total + block - 1) // block
    m = torch.tril(torch.ones(blocks, blocks)).repeat_interleave(block, 0).repeat_interleave(block, 1)
    return m[:total, :total]


class Recorder:
    """Wraps a reference model: bans the mask id from the logits and records every call's window."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, input_ids, position_ids=None, store_kv=False, **kw):
        start = int(position_ids[0, 0]) if position_ids is not None else 0
        self.calls.append((start, input_ids[0].tolist(), bool(store_kv)))
        out = self.model(input_ids, position_ids=position_ids, store_kv=store_kv, **kw)
        if out.logits is not None:
            out.logits[..., MASK] = float("-inf")
        return out


def commits_per_denoising_forward(calls):
    """What each denoising forward committed: the slots masked in its window and unmasked in the next
    call over the same start (the next denoising step or the store forward)."""
    forwards = []
    for i, (start, ids, store) in enumerate(calls):
        if store:
            continue
        nxt = next(c for c in calls[i + 1:] if c[0] == start)
        forwards.append([[start + j, b] for j, (a, b) in enumerate(zip(ids, nxt[1])) if a == MASK and b != MASK])
    return forwards
