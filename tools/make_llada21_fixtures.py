#!/usr/bin/python3
"""Builds the LLaDA 2.1 token-editing trajectories under tests/data/families/llada2_tiny/ from the
published LLaDA2.1 generate() (tests/test_editing.cpp checks dlm's llada21 presets against them).

Usage (the reference is a checkout made outside the repository; nothing of it is copied here):
    build/venv-ref/bin/python tools/make_llada21_fixtures.py --dllm /tmp/ref_dllm [--model tests/data/families/llada2_tiny]

  --dllm DIR    a checkout of github.com/ZHZisZZ/dllm, which keeps the LLaDA2.1 checkpoints' published
                Hugging Face modeling code: imports DIR/dllm/pipelines/llada21/models/
                {configuration,modeling}_llada21_moe.py, the model and LLaDA2MoeModelLM.generate() with
                editing_threshold, max_post_steps and num_to_transfer (the model card's decoder).
  --model DIR   the tiny LLaDA2 checkpoint to decode with (default: tests/data/families/llada2_tiny, the
                random LLaDA2MoeModelLM tools/make_family_fixtures.py wrote; LLaDA 2.0 and 2.1 share the
                architecture). Its logits are checked against the folder's logits_block_diffusion.f32
                first, so the trajectories are the committed model's.
  --out DIR     where the trajectory_llada21_*.json files go (default: the --model folder).

Each trajectory records, for every forward of the reference generate(), the slots it filled
("fills": [position, token]) and the filled slots it replaced ("edits": [position, old, new]), read
from the canvas it passed to that forward and the canvas after it (the reference writes into views of
one tensor; the view passed to the last forward is read after generate() returns), and the answer
generate() returned (cut after the first EOS; `eos_id` in a case's params, when there, is its EOS).

Shims: those of tools/family_fixtures_common.py (transformers 5, no flash_attn on a CPU); the bf16
block mask generate() builds is passed on as f32 (its entries are 0 and -inf either way); the mask id
is banned from the logits (dlm never draws it); temperature 0 (greedy), as in both modes' reference runs.
Checked with torch 2.15.0 and transformers 5.23.0.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from family_fixtures_common import (EOS, EOS2, MASK, block_diffusion_mask, describe, import_package,  # noqa: E402
                                    install_shims, write_json)


def load_model(ref, model_dir):
    install_shims()
    folder = os.path.join(ref, "dllm", "pipelines", "llada21", "models")
    configuration, modeling = import_package(folder, "llada21_ref", ["configuration_llada21_moe", "modeling_llada21_moe"])
    import json
    from safetensors.torch import load_file
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    config = configuration.LLaDA2MoeConfig(**{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")})
    config._attn_implementation = "sdpa"
    model = modeling.LLaDA2MoeModelLM(config).eval()
    state = load_file(os.path.join(model_dir, "model.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or [m for m in missing if not m.endswith("inv_freq")]:
        raise SystemExit(f"checkpoint does not fit LLaDA2.1's model: missing {missing}, unexpected {unexpected}")
    return folder, model


def check_logits(model, model_dir):
    """The model's logits under the block-diffusion mask equal the folder's recorded ones."""
    import json
    with open(os.path.join(model_dir, "expected.json")) as f:
        e = json.load(f)
    ids = torch.tensor([e["input_ids"]])
    total = ids.shape[1]
    mask = block_diffusion_mask(total, e["block_length"]).log()[None, None]
    with torch.no_grad():
        logits = model(ids, attention_mask=mask, position_ids=torch.arange(total).unsqueeze(0)).logits[0]
    want = np.fromfile(os.path.join(model_dir, e["cases"]["block_diffusion"]), dtype=np.float32).reshape(logits.shape)
    diff = float(np.abs(logits.numpy() - want).max() / np.abs(want).max())
    if diff > 1e-5:
        raise SystemExit(f"LLaDA2.1's model gives other logits than {model_dir} records (max rel. diff {diff})")


def trajectory(model, prompt, params):
    """Runs generate() and returns (forwards, answer): per forward its fills and edits."""
    calls = []  # (the tensor passed, a copy of it)
    inner = model.forward

    def recorded(input_ids=None, attention_mask=None, **kw):
        calls.append((input_ids, input_ids[0].tolist()))
        out = inner(input_ids=input_ids, attention_mask=attention_mask.float(), **kw)
        out.logits[..., MASK] = float("-inf")
        return out

    model.forward = recorded
    try:
        with torch.no_grad():
            answer = model.generate(prompt.clone(), mask_id=MASK, **dict({"eos_id": EOS}, **params))
    finally:
        del model.forward
    block = params["block_length"]
    forwards = []
    for i, (tensor, before) in enumerate(calls):
        after = calls[i + 1][1][:len(before)] if i + 1 < len(calls) else tensor[0].tolist()
        start = len(before) - block  # the active block is the window's last block
        fills, edits = [], []
        for p in range(start, len(before)):
            a, b = before[p], after[p]
            if a == b:
                continue
            if a == MASK:
                fills.append([p, b])
            else:
                edits.append([p, a, b])
        forwards.append({"fills": fills, "edits": edits})
    return forwards, answer[0].tolist()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dllm", required=True, help="checkout of github.com/ZHZisZZ/dllm (LLaDA2.1's modeling code)")
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--model", default=os.path.join(here, "..", "tests", "data", "families", "llada2_tiny"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out = args.out or args.model
    folder, model = load_model(args.dllm, args.model)
    check_logits(model, args.model)
    generator = torch.Generator().manual_seed(21)
    block = 8
    reference = describe(os.path.join(folder, "modeling_llada21_moe.py"))
    base = dict(temperature=0.0, block_length=block, eos_early_stop=True, num_to_transfer=1, max_post_steps=16)
    cases = [  # name, prompt length, gen_length, parameters
        ("llada21_quality", 2 * block, 3 * block, dict(base, threshold=0.7, editing_threshold=0.5)),
        ("llada21_speedy", 2 * block, 3 * block, dict(base, threshold=0.5, editing_threshold=0.0)),
        ("llada21_edit_0.2", 2 * block, 3 * block, dict(base, threshold=0.9, editing_threshold=0.2)),
        ("llada21_two_post_steps", 2 * block, 3 * block, dict(base, threshold=0.5, editing_threshold=0.0, max_post_steps=2)),
        ("llada21_no_post_steps", 2 * block, 3 * block, dict(base, threshold=0.5, editing_threshold=0.0, max_post_steps=0)),
        ("llada21_two_per_forward", 2 * block, 3 * block, dict(base, threshold=0.95, editing_threshold=0.1, num_to_transfer=2)),
        # An 11-token prompt: block 1 [8, 16) holds 3 prompt tokens, which are never edited.
        ("llada21_unaligned_prompt", block + 3, 3 * block - 3, dict(base, threshold=0.5, editing_threshold=0.0)),
        # The early stop: token 72, which the tiny model draws often, as EOS (eos_early_stop after a block).
        ("llada21_eos_stop", 2 * block, 3 * block, dict(base, threshold=0.7, editing_threshold=0.5, eos_id=72)),
    ]
    for name, prompt_len, gen, params in cases:
        prompt = torch.randint(0, EOS2, (1, prompt_len), generator=generator)
        forwards, answer = trajectory(model, prompt, dict(params, gen_length=gen))
        edits = sum(len(f["edits"]) for f in forwards)
        write_json(os.path.join(out, f"trajectory_{name}.json"), {
            "reference": reference, "function": "LLaDA2MoeModelLM.generate (LLaDA2.1)", "prompt": prompt[0].tolist(),
            "gen_length": gen, "block_length": block, "params": params, "forwards": forwards, "answer": answer})
        print(f"{name}: {len(forwards)} forwards, {edits} edits, answer of {len(answer)}")


if __name__ == "__main__":
    main()
