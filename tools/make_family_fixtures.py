#!/usr/bin/python3
"""Builds the tiny block-diffusion family fixtures under tests/data/families/ from each family's own
published modeling and generation code (tests/test_families.cpp checks dlm against them).

Usage (each reference is a checkout made outside the repository; nothing of it is copied here):
    /tmp/venv13/bin/python tools/make_family_fixtures.py --sdar /tmp/ref_SDAR [--out tests/data/families]

  --sdar DIR   a checkout of github.com/JetAstra/SDAR: imports
               DIR/training/model/SDAR-4B-Chat/{configuration_sdar,modeling_sdar}.py (the modeling code
               published with the checkpoints) and DIR/generate.py (block_diffusion_generate).
  --sdar-moe DIR   the same SDAR checkout: SDAR-MoE (SDARMoeForCausalLM), whose published
               modeling_sdar_moe.py is on the Hugging Face hub only, is built as that file is: SDAR's
               model with transformers' Qwen3MoeSparseMoeBlock as the MLP of every layer that
               Qwen3-MoE gives experts (the SDAR team's JetEngine port, Labman42/JetEngine
               jetengine/models/sdar_moe.py, routes the same way: softmax, top-k, normalised);
               the checkpoint names each expert (mlp.experts.E.{gate,up,down}_proj.weight, mlp.gate.weight).
  --llada2 DIR   a checkout of github.com/ZHZisZZ/dllm (it keeps LLaDA2.0's published Hugging Face modeling
               code): imports DIR/dllm/pipelines/llada2/models/{configuration,modeling}_llada2_moe.py, the model and
               LLaDA2MoeModelLM.generate().
  --lladamoe DIR   the same dllm checkout: DIR/dllm/pipelines/llada/models/{configuration,modeling}_lladamoe.py
               (LLaDA-MoE's modeling code); with
  --llada DIR  a checkout of github.com/ML-GSAI/LLaDA, whose generate.py (LLaDA's sampler, which LLaDA-MoE is
               decoded with) gives the trajectories.
  --fast-dllm-v2 DIR   a folder holding Fast-dLLM v2's published Hugging Face files, configuration.py and
               modeling.py of Efficient-Large-Model/Fast_dLLM_v2_7B (e.g. the copy kept in
               github.com/Satgoy152/DualDiffusion under FastDLLM_inferencing/Fast_dLLM_v2_7B): the model and
               its generate() (sub-block threshold decoding, use_block_cache off); with
  --fast-dllm-v2-batch-sample FILE   Fast-dLLM's v2/generation_functions.py (the evaluation's batch_sample;
               NVlabs/Fast-dLLM's v2 folder, e.g. as kept in a fork): three more trajectories with
               use_block_cache=True (the sub-block cache), recorded on the same model.

For each family the script builds a tiny random configuration in the family's config.json format (few
layers, small widths, a 300-token vocabulary with the family's mask id remapped to 299 and EOS to 297),
runs the reference model in f32 on the CPU and writes, in DIR/<family>_tiny/:
  config.json, generation_config.json, model.safetensors   laid out as the published checkpoints
  expected.json            input ids, layout, the cases below
  logits_<case>.f32         raw little-endian f32 [tokens x vocab] logits under the family's own mask
  trajectory_<case>.json    what each denoising forward of the reference generate function committed

Shims (the references were written for transformers 4.5x on CUDA; nothing in their files is edited):
  - flash_attn is absent on a CPU: flash_attn_func is scaled_dot_product_attention (GQA, no causal mask)
    and rms_norm_fn the textbook f32 RMSNorm (the commented-out code in SDARRMSNorm.forward);
  - transformers 5 dropped transformers.utils.LossKwargs (a TypedDict used in a type annotation) and
    transformers.modeling_attn_mask_utils (SDAR imports AttentionMaskConverter for a method it never calls,
    LLaDA2 the 4-D mask helpers, which return a 4-D mask as it is) and import_utils.is_torch_fx_available
    (False): stand-ins are added; its table of RoPE initialisers lost 'default': transformers 4's plain RoPE is put back; DynamicCache lost
    indexing by layer (cache[i] -> (keys, values)), which SDAR's attention reads: put back;
  - sampling: generate.py draws with torch.multinomial; the script replaces it by argmax for the duration of
    the call, so the trajectory is the reference's rule on greedy draws (x0_p stays the probability of the
    drawn token under the tempered softmax, as in the reference). dlm never commits the mask id; the
    recorded model bans it too (its logit set to -inf), as tools/make_trajectory_fixtures.py does.
Checked with torch 2.15.0 and transformers 5.24.0.
"""
import argparse
import os
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from family_fixtures_common import (EOS, EOS2, MASK, VOCAB, Recorder, block_diffusion_mask,  # noqa: E402
                                    commits_per_denoising_forward, describe, greedy_multinomial, import_file,
                                    import_package, install_shims, randomize, save_checkpoint, write_json, write_logits)


# -- SDAR ------------------------------------------------------------------------------------------
SDAR_MOE_KEYS = dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True,
                     decoder_sparse_step=1, mlp_only_layers=[0], output_router_logits=False, router_aux_loss_coef=0.001)


def add_qwen3_moe_blocks(model, cfg):
    """SDAR-MoE: SDAR's model with Qwen3-MoE's sparse block (transformers' Qwen3MoeSparseMoeBlock) as the
    MLP of the layers Qwen3MoeDecoderLayer gives one, which is what SDARMoeForCausalLM is (the published
    modeling_sdar_moe.py is not on GitHub; the SDAR team's JetEngine port computes the same routing)."""
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock
    qcfg = Qwen3MoeConfig(**{k: cfg[k] for k in ("hidden_size", "hidden_act", "num_experts", "num_experts_per_tok",
                                                 "moe_intermediate_size", "norm_topk_prob")})
    for i, layer in enumerate(model.model.layers):
        if i not in cfg["mlp_only_layers"] and (i + 1) % cfg["decoder_sparse_step"] == 0:
            layer.mlp = Qwen3MoeSparseMoeBlock(qcfg)


def per_expert_names(state):
    """transformers 5 holds a layer's experts as two 3-D tensors; the published checkpoints name each
    expert's matrices (mlp.experts.E.{gate,up,down}_proj.weight), as transformers' loader expects."""
    out = {}
    for k, v in state.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            half = v.shape[1] // 2
            for e in range(v.shape[0]):
                out[k[:-len("gate_up_proj")] + f"{e}.gate_proj.weight"] = v[e, :half]
                out[k[:-len("gate_up_proj")] + f"{e}.up_proj.weight"] = v[e, half:]
        elif k.endswith("mlp.experts.down_proj"):
            for e in range(v.shape[0]):
                out[k[:-len("down_proj")] + f"{e}.down_proj.weight"] = v[e]
        else:
            out[k] = v
    return out


def make_sdar(ref, out, generator, moe=False):
    install_shims()
    folder = os.path.join(ref, "training", "model", "SDAR-4B-Chat")
    configuration, modeling = import_package(folder, "sdar_ref", ["configuration_sdar", "modeling_sdar"])
    generate = import_file(os.path.join(ref, "generate.py"), "sdar_generate")
    cfg = dict(architectures=["SDARForCausalLM"], model_type="sdar", attention_bias=False, block_size=4,
               bos_token_id=EOS2, eos_token_id=EOS, mask_token_id=MASK, head_dim=24, hidden_act="silu", hidden_size=64,
               intermediate_size=96, max_position_embeddings=512, num_attention_heads=4, num_hidden_layers=2,
               num_key_value_heads=2, rms_norm_eps=1e-6, rope_scaling=None, rope_theta=1000000, sliding_window=None,
               tie_word_embeddings=False, torch_dtype="float32", use_sliding_window=False, vocab_size=VOCAB,
               attention_dropout=0.0, debug=False, ep_size=1, fuse_cross_entropy=True, max_window_layers=2,
               micro_forward=False, skip_checkpoint=False, use_cache=False, use_deepep=False)
    if moe:  # SDAR-30B-A3B-Chat's keys, tiny: a dense first layer (mlp_only_layers), then two expert layers
        cfg.update(architectures=["SDARMoeForCausalLM"], model_type="sdar_moe", num_hidden_layers=3,
                   max_window_layers=3, **SDAR_MOE_KEYS)
    # pad_token_id: transformers 5 no longer defaults it, SDARModel reads it (the padding row of the embedding)
    skip = ("architectures", "model_type", *SDAR_MOE_KEYS)
    config = configuration.SDARConfig(pad_token_id=None, **{k: v for k, v in cfg.items() if k not in skip})
    config._attn_implementation = "sdpa"
    model = modeling.SDARForCausalLM(config).eval()
    if moe:
        add_qwen3_moe_blocks(model, cfg)
    randomize(model, generator)
    fixture = "sdar_moe_tiny" if moe else "sdar_tiny"
    target = os.path.join(out, fixture)
    os.makedirs(target, exist_ok=True)
    write_json(os.path.join(target, "config.json"), cfg)
    write_json(os.path.join(target, "generation_config.json"), {"bos_token_id": EOS2, "eos_token_id": [EOS2, EOS]})
    save_checkpoint(model, target, rename=per_expert_names if moe else None)

    prompt_len, gen, block = 8, 16, 4
    ids = torch.randint(0, EOS2, (1, prompt_len + gen), generator=generator)
    ids[0, prompt_len + 3:] = MASK  # a decode in progress: block 0 partly committed, the rest masked
    ids[0, prompt_len + 5] = int(torch.randint(0, EOS2, (1,), generator=generator))
    total = prompt_len + gen
    with torch.no_grad():
        logits = model(ids, attention_mask=block_diffusion_mask(total, block).unsqueeze(0),
                       position_ids=torch.arange(total).unsqueeze(0)).logits[0]
    cases = {"block_diffusion": write_logits(target, "block_diffusion", logits)}
    expected = {"generator": f"tools/make_family_fixtures.py (torch {torch.__version__})",
                "reference": describe(os.path.join(folder, "modeling_sdar.py")),
                **({"moe_block": f"transformers {transformers_version()} Qwen3MoeSparseMoeBlock"} if moe else {}),
                "input_ids": ids[0].tolist(), "prompt_length": prompt_len, "gen_length": gen, "block_length": block,
                "vocab_size": VOCAB, "cases": cases}
    write_json(os.path.join(target, "expected.json"), expected)

    prompt = torch.randint(0, EOS2, (1, prompt_len), generator=generator)
    # The third: a prompt that is not whole blocks; the reference starts the first block at position 4,
    # so it holds two prompt tokens and two slots; 18 slots end the canvas on a block boundary (24).
    for name, params, n in (("sdar_dynamic", dict(confidence_threshold=0.85, denoising_steps=4), gen),
                            ("sdar_low_threshold", dict(confidence_threshold=0.3, denoising_steps=2), gen),
                            ("sdar_unaligned_prompt", dict(confidence_threshold=0.85, denoising_steps=4), 18)):
        if name == "sdar_unaligned_prompt":
            prompt = torch.randint(0, EOS2, (1, 6), generator=generator)
        rec = Recorder(model)
        with greedy_multinomial(), torch.no_grad():
            x = generate.block_diffusion_generate(rec, {"input_ids": prompt}, MASK, gen_length=n, block_length=block,
                                                  temperature=1.0, remasking_strategy="low_confidence_dynamic",
                                                  stopping_criteria_idx=[EOS2, EOS], **params)
        write_json(os.path.join(target, f"trajectory_{name}.json"), {
            "reference": describe(os.path.join(ref, "generate.py")),
            "function": "block_diffusion_generate", "prompt": prompt[0].tolist(), "gen_length": n,
            "block_length": block, "params": dict(params, temperature=1.0, remasking_strategy="low_confidence_dynamic",
                                                  stopping_criteria_idx=[EOS2, EOS]),
            "forwards": commits_per_denoising_forward(rec.calls),
            "store_forwards": sum(1 for c in rec.calls if c[2]),
            "final": x[0, prompt.shape[1]:].tolist()})
    print(f"{fixture}: {len(cases)} logits case(s), 3 trajectories")


def transformers_version():
    import transformers
    return transformers.__version__


def commits_between_canvases(calls, final):
    """For references that pass the whole canvas to every forward (LLaDA2, LLaDA): forward i committed the
    slots masked in its input and unmasked in the next forward's input (the last one: in `final`)."""
    forwards = []
    for i, ids_i in enumerate(calls):
        after = calls[i + 1] if i + 1 < len(calls) else final
        forwards.append([[p, b] for p, (a, b) in enumerate(zip(ids_i, after)) if a == MASK and b != MASK])
    return forwards


# -- Fast-dLLM v2 ----------------------------------------------------------------------------------
class V2Recorder:
    """Records each forward of Fast-dLLM v2's generate() or batch_sample(): window start (the cache
    length, plus replace_position for a sub-block forward of the block cache), window ids, whether it
    stores the window's K/V; bans the mask id from the logits."""

    def __init__(self, model):
        self.calls, self.inner = [], model.forward

    def __call__(self, input_ids=None, past_key_values=None, update_past_key_values=False, **kw):
        start = past_key_values.get_seq_length() if past_key_values is not None else 0
        start += kw.get("replace_position") or 0
        self.calls.append((start, input_ids[0].tolist(), bool(update_past_key_values)))
        out = self.inner(input_ids=input_ids, past_key_values=past_key_values, update_past_key_values=update_past_key_values, **kw)
        out.logits[..., MASK] = float("-inf")
        return out


def v2_commits(calls, canvas_size, prompt_len=0, final=None):
    """Per forward: a denoising forward commits the slots masked in its window and unmasked in the next
    call whose window overlaps it (the next denoising step, of the block or of the same sub-block, or
    the store forward; none: `final`, the whole canvas); a storing forward (the prompt's, or a
    finished block's) commits the next block's first slot by argmax, seen as the first id of the next
    window. Slots past the canvas (the token after the last block) are dropped. The prompt's storing
    forward of a prompt that is not whole blocks (it stores the whole blocks only, and the next window
    starts inside the prompt) commits nothing and is left out: dlm stores those K/V in the first
    block's first forward."""
    forwards = []
    for i, (start, ids, store) in enumerate(calls):
        later = calls[i + 1:]
        if store and start + len(ids) < prompt_len:
            continue
        if store:
            nxt = next((c for c in later if c[0] == start + len(ids)), None)
            at = start + len(ids)
            forwards.append([[at, nxt[1][0]]] if nxt is not None and at < canvas_size else [])
            continue
        end = start + len(ids)
        nxt = next((c for c in later if c[0] < end and c[0] + len(c[1]) > start), None)
        after = {p: b for p, b in enumerate(final)} if nxt is None else {nxt[0] + j: b for j, b in enumerate(nxt[1])}
        forwards.append([[start + j, after[start + j]] for j, a in enumerate(ids)
                         if a == MASK and start + j in after and after[start + j] != MASK])
    while forwards and not forwards[-1]:
        forwards.pop()
    return forwards


class PadTokenizer:
    """batch_sample reads tokenizer.pad_token_id only (to pad finished rows of a batch)."""
    pad_token_id = EOS


def v2_block_cache_trajectories(model, batch_sample_file, target, prompts, block, sub, gen_for):
    """Trajectories of the v2 evaluation's batch_sample with use_block_cache=True (one sequence)."""
    gen_module = import_file(batch_sample_file, "fast_dllm_v2_generation")
    batch_sample = types.MethodType(gen_module.Fast_dLLM_QwenForCausalLM.batch_sample, model)
    for name, (prompt, threshold) in prompts.items():
        n = prompt.shape[1]
        canvas = (n // block + gen_for // block) * block
        rec = V2Recorder(model)
        model.forward = rec
        try:
            with torch.no_grad():
                result = batch_sample(prompt.clone(), PadTokenizer(), block, gen_for, sub, n, torch.tensor([n]), mask_id=MASK,
                                      threshold=threshold, stop_token=EOS, use_block_cache=True, temperature=0.0)
        finally:
            del model.forward
        x = (result[0] if isinstance(result, tuple) else result)[0][:canvas].tolist()
        write_json(os.path.join(target, f"trajectory_{name}.json"), {
            "reference": describe(batch_sample_file), "function": "Fast_dLLM_QwenForCausalLM.batch_sample",
            "prompt": prompt[0].tolist(), "gen_length": canvas - n, "block_length": block,
            "params": {"threshold": threshold, "small_block_size": sub, "block_size": block, "temperature": 0,
                       "use_block_cache": True, "stop_token": EOS},
            "forwards": v2_commits(rec.calls, canvas, n, x), "reference_forwards": len(rec.calls),
            "sub_block_forwards": sum(1 for c in rec.calls if not c[2] and len(c[1]) < block),
            "final": x[n:canvas]})


def make_fast_dllm_v2(ref, out, generator, batch_sample_file=None):
    install_shims()
    configuration, modeling = import_package(ref, "fast_dllm_v2_ref", ["configuration", "modeling"])
    block, sub = 8, 4
    layers = 2
    cfg = dict(architectures=["Fast_dLLM_QwenForCausalLM"], model_type="Fast_dLLM_Qwen", attention_dropout=0.0, bd_size=block,
               bos_token_id=EOS2, eos_token_id=EOS, hidden_act="silu", hidden_size=64, initializer_range=0.02,
               intermediate_size=96, layer_types=["full_attention"] * layers, max_position_embeddings=512,
               max_window_layers=layers, mask_token_id=MASK, num_attention_heads=4, num_hidden_layers=layers,
               num_key_value_heads=2, pad_token_id=EOS, rms_norm_eps=1e-6, rope_scaling=None, rope_theta=1000000.0,
               sliding_window=None, tie_word_embeddings=False, torch_dtype="float32", use_cache=True,
               use_sliding_window=False, vocab_size=VOCAB)
    config = configuration.Fast_dLLM_QwenConfig(**{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")})
    config._attn_implementation = "sdpa"
    model = modeling.Fast_dLLM_QwenForCausalLM(config).eval()
    randomize(model, generator)
    target = os.path.join(out, "fast_dllm_v2_tiny")
    os.makedirs(target, exist_ok=True)
    write_json(os.path.join(target, "config.json"), cfg)
    write_json(os.path.join(target, "generation_config.json"), {"bos_token_id": EOS2, "eos_token_id": [EOS, EOS2]})
    save_checkpoint(model, target)

    prompt_len, gen = 2 * block, 3 * block
    total = prompt_len + gen
    ids = torch.randint(0, EOS2, (1, total), generator=generator)
    ids[0, prompt_len + 3:] = MASK
    ids[0, prompt_len + 9] = int(torch.randint(0, EOS2, (1,), generator=generator))
    with torch.no_grad():  # no cache: the model's own eval mask (block_q >= block_kv over the whole input)
        logits = model(input_ids=ids, block_size=block).logits[0]
    cases = {"block_diffusion": write_logits(target, "block_diffusion", logits)}
    write_json(os.path.join(target, "expected.json"), {
        "generator": f"tools/make_family_fixtures.py (torch {torch.__version__})",
        "reference": describe(os.path.join(ref, "modeling.py")), "input_ids": ids[0].tolist(),
        "prompt_length": prompt_len, "gen_length": gen, "block_length": block, "vocab_size": VOCAB, "cases": cases})

    prompt = torch.randint(0, EOS2, (1, prompt_len), generator=generator)
    for name, threshold in {"fast_dllm_v2_threshold": 0.9, "fast_dllm_v2_low_threshold": 0.2}.items():
        rec = V2Recorder(model)
        model.forward = rec
        try:
            with torch.no_grad():
                result = model.generate(prompt.clone(), max_new_tokens=gen, mask_id=MASK, threshold=threshold,
                                        small_block_size=sub, block_size=block, stop_token=EOS, temperature=0)
        finally:
            del model.forward
        x = result[0] if isinstance(result, tuple) else result
        write_json(os.path.join(target, f"trajectory_{name}.json"), {
            "reference": describe(os.path.join(ref, "modeling.py")), "function": "Fast_dLLM_QwenForCausalLM.generate",
            "prompt": prompt[0].tolist(), "gen_length": gen, "block_length": block,
            "params": {"threshold": threshold, "small_block_size": sub, "block_size": block, "temperature": 0,
                       "use_block_cache": False, "stop_token": EOS},
            "forwards": v2_commits(rec.calls, total), "reference_forwards": len(rec.calls),
            "final": x[0, prompt_len:total].tolist()})
    # A prompt that is not whole blocks (11 tokens): the reference stores the first 8, fills the block
    # [8, 16) up with 5 masks and decodes them by sub-blocks from position 8, without a first slot of
    # its own; 3 blocks then end at 32, so 21 slots.
    prompt = torch.randint(0, EOS2, (1, block + 3), generator=generator)
    rec = V2Recorder(model)
    model.forward = rec
    try:
        with torch.no_grad():
            result = model.generate(prompt.clone(), max_new_tokens=3 * block, mask_id=MASK, threshold=0.9,
                                    small_block_size=sub, block_size=block, stop_token=EOS, temperature=0)
    finally:
        del model.forward
    x = result[0] if isinstance(result, tuple) else result
    write_json(os.path.join(target, "trajectory_fast_dllm_v2_unaligned_prompt.json"), {
        "reference": describe(os.path.join(ref, "modeling.py")), "function": "Fast_dLLM_QwenForCausalLM.generate",
        "prompt": prompt[0].tolist(), "gen_length": 4 * block - (block + 3), "block_length": block,
        "params": {"threshold": 0.9, "small_block_size": sub, "block_size": block, "temperature": 0,
                   "use_block_cache": False, "stop_token": EOS},
        "forwards": v2_commits(rec.calls, 4 * block, block + 3), "reference_forwards": len(rec.calls),
        "final": x[0, block + 3:4 * block].tolist()})
    if batch_sample_file:  # the sub-block cache, from the evaluation's batch_sample
        g = torch.Generator().manual_seed(20)
        v2_block_cache_trajectories(model, batch_sample_file, target, {
            "fast_dllm_v2_block_cache": (torch.randint(0, EOS2, (1, prompt_len), generator=g), 0.9),
            "fast_dllm_v2_block_cache_low_threshold": (torch.randint(0, EOS2, (1, prompt_len), generator=g), 0.2),
            "fast_dllm_v2_block_cache_unaligned_prompt": (torch.randint(0, EOS2, (1, block + 3), generator=g), 0.9)}, block, sub, gen)
    print(f"fast_dllm_v2_tiny: {len(cases)} logits case(s), {6 if batch_sample_file else 3} trajectories")


# -- LLaDA2 ---------------------------------------------------------------------------------------
def make_llada2(ref, out, generator):
    install_shims()
    folder = os.path.join(ref, "dllm", "pipelines", "llada2", "models")
    configuration, modeling = import_package(folder, "llada2_ref", ["configuration_llada2_moe", "modeling_llada2_moe"])
    block, layers = 8, 3
    cfg = dict(architectures=["LLaDA2MoeModelLM"], model_type="llada2_moe", eos_token_id=EOS, first_k_dense_replace=1,
               head_dim=16, hidden_act="silu", hidden_size=64, intermediate_size=96, mask_token_id=MASK,
               max_position_embeddings=512, moe_intermediate_size=32, moe_router_enable_expert_bias=True, n_group=4,
               norm_head=False, norm_topk_prob=True, num_attention_heads=4, num_experts=8, num_experts_per_tok=2,
               num_hidden_layers=layers, num_key_value_heads=2, num_shared_experts=1, pad_token_id=EOS2,
               partial_rotary_factor=0.5, rms_norm_eps=1e-6, rope_scaling=None, rope_theta=600000, routed_scaling_factor=2.5,
               score_function="sigmoid", tie_word_embeddings=False, topk_group=2, torch_dtype="float32", use_bias=False,
               use_qk_norm=True, use_qkv_bias=False, vocab_size=VOCAB)
    config = configuration.LLaDA2MoeConfig(**{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")})
    config._attn_implementation = "sdpa"
    model = modeling.LLaDA2MoeModelLM(config).eval()
    randomize(model, generator)
    with torch.no_grad():  # expert_bias is a buffer: random too, so that it changes picks
        for name, b in model.named_buffers():
            if name.endswith("expert_bias"):
                b.copy_(0.1 * torch.randn(b.shape, generator=generator))
    target = os.path.join(out, "llada2_tiny")
    os.makedirs(target, exist_ok=True)
    write_json(os.path.join(target, "config.json"), cfg)
    save_checkpoint(model, target)

    prompt_len, gen = 2 * block, 3 * block
    total = prompt_len + gen
    ids = torch.randint(0, EOS2, (1, total), generator=generator)
    ids[0, prompt_len + 3:] = MASK
    ids[0, prompt_len + 9] = int(torch.randint(0, EOS2, (1,), generator=generator))
    mask = block_diffusion_mask(total, block).log()[None, None]  # generate()'s additive mask (f32 here)
    with torch.no_grad():
        logits = model(ids, attention_mask=mask, position_ids=torch.arange(total).unsqueeze(0)).logits[0]
    cases = {"block_diffusion": write_logits(target, "block_diffusion", logits)}
    write_json(os.path.join(target, "expected.json"), {
        "generator": f"tools/make_family_fixtures.py (torch {torch.__version__})",
        "reference": describe(os.path.join(folder, "modeling_llada2_moe.py")), "input_ids": ids[0].tolist(),
        "prompt_length": prompt_len, "gen_length": gen, "block_length": block, "vocab_size": VOCAB, "cases": cases})

    prompt = torch.randint(0, EOS2, (1, prompt_len), generator=generator)
    inner = model.forward
    # The third: a prompt that is not whole blocks (11 tokens: block 1 holds 3 prompt tokens and 5
    # slots), 21 slots so that the canvas ends on a block boundary (32). The fourth, on that prompt:
    # an answer of 5 slots, shorter than a block, for which generate() caps steps at gen_length (8
    # planned steps become 5 of 2, 2, 2, 1, 1 slots). The fifth: top-k and top-p at temperature 0,
    # which generate()'s sampler ignores (it returns the argmax before filtering).
    for name, params, n in (("llada2_threshold", dict(threshold=0.95, steps=block), gen),
                            ("llada2_low_threshold", dict(threshold=0.3, steps=4), gen),
                            ("llada2_unaligned_prompt", dict(threshold=0.95, steps=block), 3 * block - 3),
                            ("llada2_short_answer", dict(threshold=0.95, steps=block), 5),
                            ("llada2_greedy_filters", dict(threshold=0.95, steps=block, top_k=3, top_p=0.5), 3 * block - 3)):
        if name == "llada2_unaligned_prompt":
            prompt = torch.randint(0, EOS2, (1, block + 3), generator=generator)
        calls = []

        def recorded(input_ids=None, attention_mask=None, **kw):
            calls.append(input_ids[0].tolist())
            out = inner(input_ids=input_ids, attention_mask=attention_mask.float(), **kw)  # the bf16 mask as f32
            out.logits[..., MASK] = float("-inf")
            return out
        model.forward = recorded
        try:
            with torch.no_grad():
                answer = model.generate(prompt.clone(), temperature=0.0, block_length=block, gen_length=n, eos_id=EOS,
                                        mask_id=MASK, **params)
        finally:
            del model.forward
        forwards = commits_between_canvases(calls, prompt[0].tolist() + answer[0].tolist())
        write_json(os.path.join(target, f"trajectory_{name}.json"), {
            "reference": describe(os.path.join(folder, "modeling_llada2_moe.py")), "function": "LLaDA2MoeModelLM.generate",
            "prompt": prompt[0].tolist(), "gen_length": n, "block_length": block,
            "params": dict(params, temperature=0.0, block_length=block, eos_id=EOS),
            "forwards": forwards, "final": answer[0].tolist()})
    print(f"llada2_tiny: {len(cases)} logits case(s), 5 trajectories")


# -- LLaDA-MoE ------------------------------------------------------------------------------------
def make_lladamoe(ref, llada, out, generator):
    install_shims()
    folder = os.path.join(ref, "dllm", "pipelines", "llada", "models")
    configuration, modeling = import_package(folder, "lladamoe_ref", ["configuration_lladamoe", "modeling_lladamoe"])
    generate = import_file(os.path.join(llada, "generate.py"), "llada_generate")
    layers = 3
    cfg = dict(architectures=["LLaDAMoEModelLM"], model_type="lladamoe", attention_bias=False, dense_intermediate_size=96,
               eos_token_id=EOS, expert_intermediate_size=32, hidden_act="silu", hidden_size=64, mask_token_id=MASK,
               max_position_embeddings=512, moe_layer_freq=[0, 1, 1], moe_router_enable_expert_bias=True,
               moe_router_score_function="softmax", norm_topk_prob=False, num_attention_heads=4, num_experts=8,
               num_experts_per_tok=2, num_hidden_layers=layers, num_key_value_heads=4, pad_token_id=EOS2,
               partial_rotary_factor=1.0, qk_layernorm=True, rms_norm_eps=1e-6, rope_scaling=None, rope_theta=50000.0,
               routed_scaling_factor=1, shared_expert_intermediate_size=48, tie_word_embeddings=False, torch_dtype="float32",
               vocab_size=VOCAB)
    config = configuration.LLaDAMoEConfig(**{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")})
    config._attn_implementation = "sdpa"
    model = modeling.LLaDAMoEModelLM(config).eval()
    randomize(model, generator)
    with torch.no_grad():
        for name, b in model.named_buffers():
            if name.endswith("expert_bias"):
                b.copy_(0.05 * torch.randn(b.shape, generator=generator))
    target = os.path.join(out, "lladamoe_tiny")
    os.makedirs(target, exist_ok=True)
    write_json(os.path.join(target, "config.json"), cfg)
    save_checkpoint(model, target)

    prompt_len, gen, block = 8, 16, 8
    total = prompt_len + gen
    ids = torch.randint(0, EOS2, (1, total), generator=generator)
    ids[0, prompt_len + 3:] = MASK
    ids[0, prompt_len + 9] = int(torch.randint(0, EOS2, (1,), generator=generator))
    with torch.no_grad():  # no mask: LLaDA-MoE attends bidirectionally
        logits = model(ids).logits[0]
    cases = {"bidirectional": write_logits(target, "bidirectional", logits)}
    write_json(os.path.join(target, "expected.json"), {
        "generator": f"tools/make_family_fixtures.py (torch {torch.__version__})",
        "reference": describe(os.path.join(folder, "modeling_lladamoe.py")), "input_ids": ids[0].tolist(),
        "prompt_length": prompt_len, "gen_length": gen, "block_length": block, "vocab_size": VOCAB, "cases": cases})

    class Banned:
        """The model as generate.py calls it (model(x).logits), the mask id banned, every input recorded."""

        def __init__(self):
            self.calls, self.device = [], torch.device("cpu")

        def __call__(self, x, **kw):
            self.calls.append(x[0].tolist())
            out = model(x, **kw)
            out.logits[..., MASK] = float("-inf")
            return out

    prompt = torch.randint(0, EOS2, (1, prompt_len), generator=generator)
    rec = Banned()
    params = dict(steps=gen, gen_length=gen, block_length=block, temperature=0.0, remasking="low_confidence", mask_id=MASK)
    with torch.no_grad():
        x = generate.generate(rec, prompt, **params)
    final = x[0].tolist()
    forwards = commits_between_canvases(rec.calls, final)
    write_json(os.path.join(target, "trajectory_llada_low_confidence.json"), {
        "reference": describe(os.path.join(llada, "generate.py")), "function": "generate (LLaDA)",
        "prompt": prompt[0].tolist(), "gen_length": gen, "block_length": block, "params": params,
        "forwards": forwards, "final": final[prompt_len:]})
    print(f"lladamoe_tiny: {len(cases)} logits case(s), 1 trajectory")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sdar", help="checkout of github.com/JetAstra/SDAR")
    parser.add_argument("--sdar-moe", help="checkout of github.com/JetAstra/SDAR (its model with Qwen3-MoE's experts)")
    parser.add_argument("--llada2", help="checkout of github.com/ZHZisZZ/dllm (LLaDA2's modeling code)")
    parser.add_argument("--lladamoe", help="checkout of github.com/ZHZisZZ/dllm (LLaDA-MoE's modeling code); needs --llada")
    parser.add_argument("--llada", help="checkout of github.com/ML-GSAI/LLaDA (generate.py)")
    parser.add_argument("--fast-dllm-v2", help="folder with Fast-dLLM v2's configuration.py and modeling.py")
    parser.add_argument("--fast-dllm-v2-batch-sample", help="Fast-dLLM's v2/generation_functions.py (batch_sample): adds the "
                                                            "use_block_cache trajectories; needs --fast-dllm-v2")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                                                      "families"))
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.sdar:
        make_sdar(args.sdar, args.out, torch.Generator().manual_seed(15))
    if args.sdar_moe:
        make_sdar(args.sdar_moe, args.out, torch.Generator().manual_seed(19), moe=True)
    if args.fast_dllm_v2:
        make_fast_dllm_v2(args.fast_dllm_v2, args.out, torch.Generator().manual_seed(16), args.fast_dllm_v2_batch_sample)
    if args.llada2:
        make_llada2(args.llada2, args.out, torch.Generator().manual_seed(17))
    if args.lladamoe:
        if not args.llada:
            parser.error("--lladamoe needs --llada (LLaDA's generate.py)")
        make_lladamoe(args.lladamoe, args.llada, args.out, torch.Generator().manual_seed(18))
    if not (args.sdar or args.sdar_moe or args.fast_dllm_v2 or args.llada2 or args.lladamoe):
        parser.error("name at least one reference checkout")


if __name__ == "__main__":
    main()
