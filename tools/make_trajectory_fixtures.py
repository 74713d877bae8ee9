#!/usr/bin/env python3
"""Records the decoding trajectories of the reference implementations on the tiny fixture models
(tests/data/models/llada_tiny, dream_tiny) as JSON fixtures under tests/data/trajectories/, which
tests/test_golden.cpp replays with the matching dlm preset.

The reference code is not part of dlm: fetch each project yourself, anywhere outside this repository,
and pass its checkout directory. Each is imported and its own generate function is run unchanged:

  --llada DIR      ML-GSAI/LLaDA                  DIR/generate.py: generate()
  --dream DIR      Dream's generation_utils.py    DIR/generation_utils.py or DIR/dream/model/...:
                   (the Hugging Face model folder, DreamGenerationMixin._sample (algorithms origin,
                   or a checkout of Fast-dLLM, whose maskgit_plus, topk_margin, entropy; alg_temp)
                   copy keeps those branches as they are)
  --fast-dllm DIR  NVlabs/Fast-dLLM (v1)          DIR/v1/llada/generate.py or DIR/llada/generate.py:
                                                  generate_with_prefix_cache, generate_with_dual_cache
                                                  (threshold; factor where that version has it)
  --dinfer DIR     inclusionAI/dInfer             DIR/python/dinfer/decoding/generate_fastdllm.py:
                                                  its port of Fast-dLLM's generate_with_prefix_cache and
                                                  generate_with_dual_cache, with the factor rule
                                                  (get_transfer_index_dynamic), for Fast-dLLM versions
                                                  that lack it
  --cd4lm DIR      CD4LM's released decoder       DIR/scripts/LLaDA_generate_dynamic.py: generate_block

The models run in tools/tiny_lm.py, a torch implementation of the block documented in
docs/models.md, which is first checked against the transformers logits stored with each model.
Every forward the reference makes is recorded; the fixture lists, per forward, the (position, token)
pairs it committed. Where the reference draws from torch's random generator (random remasking,
Gumbel noise, Dream's origin and alg_temp), dlm cannot draw the same numbers, and the fixture is
marked "exact": false with the property the test checks instead (docs/policies.md lists each one).

Set up (CPU wheels from PyPI):
    python3 -m venv build/venv && build/venv/bin/pip install torch transformers safetensors numpy
Usage:
    build/venv/bin/python tools/make_trajectory_fixtures.py --llada /tmp/refs/LLaDA \\
        --dream /tmp/refs/Fast-dLLM --fast-dllm /tmp/refs/Fast-dLLM --cd4lm /tmp/refs/CD4LM \\
        --dinfer /tmp/refs/dInfer
Options --out DIR (default tests/data/trajectories) and --only NAME... select what is written.
Checked with torch 2.15.0 and transformers 5.24.0.
"""
import argparse
import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tiny_lm import TinyLM  # noqa: E402

MODELS = os.path.join(HERE, "..", "tests", "data", "models")
MASK = 299
THRESHOLD = 0.039  # the tiny models are far from confident: p(top token) is about 0.04


# -- loading the references ------------------------------------------------------------------------
def find(root, candidates):
    for rel in candidates:
        path = os.path.join(root, rel)
        if os.path.isfile(path):
            return path
    sys.exit(f"make_trajectory_fixtures.py: none of {candidates} under {root}")


def import_file(path, name):
    """Imports a reference file. Its own imports of the family's modeling code are stubbed: the tiny
    models run in tiny_lm, so only the decoding functions of the file are used."""
    stub = types.ModuleType("model")
    stub.modeling_llada = types.ModuleType("model.modeling_llada")
    stub.modeling_llada.LLaDAModelLM = None
    saved = {k: sys.modules.get(k) for k in ("model", "model.modeling_llada")}
    sys.modules.update({"model": stub, "model.modeling_llada": stub.modeling_llada})
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return module


def import_dinfer(root):
    """dInfer's Fast-dLLM port (a module of the package dinfer.decoding). The packages are set up by
    hand so that their __init__ files, which import every dInfer decoder and model, do not run; the
    port's own imports of dInfer's model classes are stubbed (the tiny models run in tiny_lm)."""
    python = os.path.join(root, "python", "dinfer")
    path = find(root, ["python/dinfer/decoding/generate_fastdllm.py"])
    stubs = {}
    for name, folder in (("dinfer", python), ("dinfer.decoding", os.path.join(python, "decoding")),
                         ("dinfer.model", os.path.join(python, "model"))):
        package = types.ModuleType(name)
        package.__path__ = [folder]
        stubs[name] = package
    for name, cls in (("dinfer.model.modeling_llada_fastdllm", "LLaDAModelLM"),
                      ("dinfer.model.modeling_fused_olmoe", "FusedOlmoeForCausalLM")):
        stubs[name] = types.ModuleType(name)
        setattr(stubs[name], cls, type(cls, (), {}))  # a class no model is an instance of
    saved = {k: sys.modules.get(k) for k in stubs}
    sys.modules.update(stubs)
    try:
        spec = importlib.util.spec_from_file_location("dinfer.decoding.generate_fastdllm", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return module, path


def describe(path):
    """Where a reference came from: the file relative to its git checkout, and the commit."""
    root = os.path.dirname(path)
    try:
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                             check=True).stdout.strip()
        commit = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
        origin = subprocess.run(["git", "-C", root, "config", "--get", "remote.origin.url"], capture_output=True,
                                text=True).stdout.strip()
        return {"file": os.path.relpath(path, top), "commit": commit, "origin": origin}
    except (subprocess.CalledProcessError, FileNotFoundError):
        return {"file": os.path.basename(path), "commit": "unknown (not a git checkout)"}


# -- the models ------------------------------------------------------------------------------------
def load_model(name):
    """The tiny model, checked against the transformers logits stored next to it."""
    folder = os.path.join(MODELS, name)
    model = TinyLM(folder)
    with open(os.path.join(folder, "expected.json")) as f:
        expected = json.load(f)
    ids = torch.tensor([expected["input_ids"]])
    got = model(ids).logits[0]
    with open(os.path.join(folder, expected["cases"]["bidirectional"]), "rb") as f:
        want = torch.frombuffer(bytearray(f.read()), dtype=torch.float32).view(got.shape)
    worst = ((got - want).abs() / want.abs().clamp(min=1)).max().item()
    if not worst < 5e-5:
        sys.exit(f"make_trajectory_fixtures.py: tiny_lm differs from transformers on {name} by {worst:.3g}")
    model.calls.clear()
    return model, worst


class Relabel:
    """CD4LM's decoder defers a fixed list of LLaDA-8B end tokens (126081, ...). This view of a tiny
    model shows its token `eos` as 126081 (and the vocabulary padded to 126349 with logits of -1e9, finite
    because the decoder zeroes non-finite logits, and 50 below the top after its clamp, so the padding
    holds 2e-17 of the probability), so the deferral applies to it; the recorded tokens are mapped back."""
    BIG, VOCAB = 126081, 126349

    def __init__(self, model, eos):
        self.model, self.eos, self.device = model, eos, model.device

    def __call__(self, x, **kw):
        small = torch.where(x == self.BIG, torch.full_like(x, self.eos), x)
        logits = self.model(small, **kw).logits
        out = torch.full(logits.shape[:-1] + (self.VOCAB,), -1e9)
        out[..., :logits.shape[-1]] = logits
        out[..., self.BIG] = logits[..., self.eos]
        out[..., self.eos] = -1e9
        return types.SimpleNamespace(logits=out)


# -- trajectories ----------------------------------------------------------------------------------
def trajectory(model, initial, final, shift, prompt_len, block, tau=None):
    """Per forward, the (position, token) pairs committed, rebuilt from the windows the reference
    passed to the model (every window holds the active block) and its final canvas; and how close
    the decisions were (a near tie could flip under dlm's rounding)."""
    canvas = list(initial)
    snapshots = []
    for ids, first, logits in model.calls:
        window = ids[0].tolist()
        canvas[first:first + len(window)] = window
        snapshots.append((list(canvas), first, logits[0]))
    snapshots.append((list(final), 0, None))
    steps = []
    gaps = {"min_top2_logit_gap": float("inf"), "min_chosen_vs_unchosen_probability_gap": float("inf")}
    if tau is not None:
        gaps["min_probability_distance_to_threshold"] = float("inf")
    for (before, first, logits), (after, _, _) in zip(snapshots, snapshots[1:]):
        commits = [[p, after[p]] for p in range(len(before)) if before[p] == MASK and after[p] != MASK]
        steps.append(commits)
        if not commits:
            continue
        b = (commits[0][0] - prompt_len) // block
        lo, hi = prompt_len + b * block, prompt_len + (b + 1) * block
        probability = {}
        for p in range(lo, hi):
            row = p - first - (1 if shift else 0)
            if before[p] != MASK or not 0 <= row < logits.shape[0]:
                continue
            top = torch.topk(logits[row], 2).values
            probability[p] = torch.softmax(logits[row].double(), -1).max().item()
            if p in dict(commits):
                gaps["min_top2_logit_gap"] = min(gaps["min_top2_logit_gap"], (top[0] - top[1]).item())
            if tau is not None:
                gaps["min_probability_distance_to_threshold"] = min(
                    gaps["min_probability_distance_to_threshold"], abs(probability[p] - tau))
        chosen = {p for p, _ in commits}
        for p, q in probability.items():
            for r, u in probability.items():
                if p in chosen and r not in chosen:
                    gaps["min_chosen_vs_unchosen_probability_gap"] = min(
                        gaps["min_chosen_vs_unchosen_probability_gap"], abs(q - u))
    return steps, gaps


def run_case(model_name, prompt_len, gen, block, call, shift, eos_view=None, tau=None, seed=0):
    model, parity = load_model(model_name)
    gen_ = torch.Generator().manual_seed(1234 + prompt_len)
    prompt = torch.randint(3, MASK, (1, prompt_len), generator=gen_)
    torch.manual_seed(seed)
    with contextlib.redirect_stdout(io.StringIO()):  # the references print progress
        final = call(Relabel(model, eos_view) if eos_view is not None else model, prompt)
    final = final[0].tolist()
    if eos_view is not None:
        final = [eos_view if t == Relabel.BIG else t for t in final]
    initial = prompt[0].tolist() + [MASK] * gen
    steps, gaps = trajectory(model, initial, final, shift, prompt_len, block, tau)
    return {"model": model_name, "prompt": prompt[0].tolist(), "gen_length": gen, "block_length": block,
            "forwards": steps, "final": final[prompt_len:],
            "diagnostics": dict(gaps, tiny_lm_vs_transformers=parity)}


def llada_cases(root):
    path = find(root, ["generate.py"])
    ref = import_file(path, "llada_generate")
    src = describe(path)

    def case(remasking="low_confidence", temperature=0.0, cfg_scale=0.0):
        def call(model, prompt):
            mask = torch.ones_like(prompt) if cfg_scale > 0 else None  # generate() needs one with cfg
            return ref.generate(model, prompt, attention_mask=mask, steps=8, gen_length=16, block_length=8,
                                temperature=temperature, cfg_scale=cfg_scale, remasking=remasking, mask_id=MASK)
        out = run_case("llada_tiny", 6, 16, 8, call, shift=False)
        out["reference"] = dict(src, function="generate")
        out["params"] = {"steps": 8, "gen_length": 16, "block_length": 8, "temperature": temperature,
                         "cfg_scale": cfg_scale, "remasking": remasking}
        return out

    yield "llada_low_confidence", case(), None
    yield "llada_cfg", case(cfg_scale=1.5), None
    yield "llada_random", case(remasking="random"), "counts"
    yield "llada_gumbel", case(temperature=1.0), "counts"


def ban_mask(step, x, logits):
    """dream_tiny's tied head predicts the mask token itself at masked rows; Dream's logits hook bans it
    (tests/test_golden.cpp bans it in dlm's sampler the same way)."""
    logits[..., MASK] = -float("inf")
    return logits


def dream_cases(root):
    path = find(root, ["generation_utils.py", "dream/model/generation_utils.py", "model/generation_utils.py"])
    ref = import_file(path, "dream_generation_utils")
    src = describe(path)

    def case(alg, alg_temp=None, steps=8):
        def call(model, prompt):
            config = types.SimpleNamespace(output_history=False, return_dict_in_generate=False, max_length=6 + 12,
                                           mask_token_id=MASK, steps=steps, eps=1e-3, alg=alg, alg_temp=alg_temp,
                                           temperature=0.0, top_p=None, top_k=None)
            sample = ref.DreamGenerationMixin._sample

            class Host:  # the mixin calls self(x, attention_mask, tok_idx) and reads self.device
                device = model.device

                def __call__(self, *a, **kw):
                    return model(*a, **kw)
            return sample(Host(), prompt, attention_mask=None, generation_config=config,
                          generation_tokens_hook_func=lambda i, x, logits: x,
                          generation_logits_hook_func=ban_mask)
        out = run_case("dream_tiny", 6, 12, 12, call, shift=True)
        out["reference"] = dict(src, function="DreamGenerationMixin._sample")
        out["params"] = {"steps": steps, "eps": 1e-3, "alg": alg, "alg_temp": alg_temp, "temperature": 0.0,
                         "max_new_tokens": 12}
        return out

    for alg in ("maskgit_plus", "topk_margin", "entropy"):
        yield f"dream_{alg}", case(alg), None
    yield "dream_origin", case("origin"), "complete"
    yield "dream_alg_temp", case("maskgit_plus", alg_temp=0.5), "counts"


def fast_dllm_case(ref, src, function, **rule):
    def call(model, prompt):
        x, _ = getattr(ref, function)(model, prompt, steps=16, gen_length=16, block_length=8, temperature=0.0,
                                      remasking="low_confidence", mask_id=MASK, **rule)
        return x
    out = run_case("llada_tiny", 6, 16, 8, call, shift=False, tau=rule.get("threshold"))
    out["reference"] = dict(src, function=function)
    out["params"] = dict({"steps": 16, "gen_length": 16, "block_length": 8, "temperature": 0.0}, **rule)
    return out


FAST_DLLM_CACHES = (("prefix", "generate_with_prefix_cache"), ("dual", "generate_with_dual_cache"))


def fast_dllm_cases(root):
    path = find(root, ["v1/llada/generate.py", "llada/generate.py"])
    ref = import_file(path, "fast_dllm_generate")
    src = describe(path)
    has_factor = "factor" in ref.generate_with_prefix_cache.__code__.co_varnames
    for cache, function in FAST_DLLM_CACHES:
        yield f"fast_dllm_{cache}_threshold", fast_dllm_case(ref, src, function, threshold=THRESHOLD), None
        if has_factor:
            yield f"fast_dllm_{cache}_factor", fast_dllm_case(ref, src, function, factor=1.0), None
    if not has_factor:
        print(f"{path}: this Fast-dLLM version has no factor rule; the factor fixtures are not written"
              " (--dinfer writes them from dInfer's port)")


def dinfer_cases(root):
    """The factor rule from dInfer's port of Fast-dLLM v1 (its early_stop stays off, as Fast-dLLM's
    functions have none). The tiny models' confidences are about 0.04, so Fast-dLLM's default factor 1
    commits one slot a step, except where two masked slots are left and the reference's loop commits
    both; factor 4 admits ranks 2 and 3 (thresholds 1 - 4/3 and 0) and fails rank 4 (0.2), so it
    tests the rule's count."""
    ref, path = import_dinfer(root)
    src = describe(path)
    for cache, function in FAST_DLLM_CACHES:
        for factor, suffix in ((1.0, ""), (4.0, "4")):
            yield f"fast_dllm_{cache}_factor{suffix}", fast_dllm_case(ref, src, function, factor=factor), None


def cd4lm_cases(root):
    path = find(root, ["scripts/LLaDA_generate_dynamic.py", "LLaDA_generate_dynamic.py"])
    ref = import_file(path, "cd4lm_generate")
    src = describe(path)
    params = {"gen_length": 16, "block_length": 8, "temperature": 0.0, "confidence_threshold": THRESHOLD,
              "min_tokens_per_step": 1, "max_tokens_per_step": 3, "max_steps_per_block": 4}

    def case(eos, ratio):
        def call(model, prompt):
            x, _ = ref.generate_block(model, prompt, mask_id=MASK, verbose=False, eos_threshold_ratio=ratio, **params)
            return x
        out = run_case("llada_tiny", 6, 16, 8, call, shift=False, eos_view=eos, tau=THRESHOLD)
        out["reference"] = dict(src, function="generate_block")
        out["params"] = dict(params, eos_token_id=eos, eos_threshold_ratio=ratio)
        return out

    # The end token: 111, deferred while fewer than 65 % of the slots are committed, never in every slot
    # at once; and 114 under a 75 % guard, which the model predicts in every masked slot of the second
    # block, so a step commits a deferred slot anyway (dlm and the reference pick different slots).
    yield "cd4lm", case(111, 0.65), None
    yield "cd4lm_all_deferred", case(114, 0.75), "same_until_all_deferred"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--llada")
    parser.add_argument("--dream")
    parser.add_argument("--fast-dllm")
    parser.add_argument("--cd4lm")
    parser.add_argument("--dinfer")
    parser.add_argument("--out", default=os.path.join(HERE, "..", "tests", "data", "trajectories"))
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    print(f"torch {torch.__version__}")
    sources = []
    if args.llada:
        sources.append(llada_cases(args.llada))
    if args.dream:
        sources.append(dream_cases(args.dream))
    if args.fast_dllm:
        sources.append(fast_dllm_cases(args.fast_dllm))
    if args.cd4lm:
        sources.append(cd4lm_cases(args.cd4lm))
    if args.dinfer:
        sources.append(dinfer_cases(args.dinfer))
    if not sources:
        parser.error("give at least one reference checkout")
    os.makedirs(args.out, exist_ok=True)
    for source in sources:
        for name, fixture, prop in source:
            if args.only and name not in args.only:
                continue
            fixture["exact"] = prop is None
            if prop:
                fixture["property"] = prop
            fixture["generator"] = f"tools/make_trajectory_fixtures.py (torch {torch.__version__})"
            with open(os.path.join(args.out, name + ".json"), "w") as f:
                json.dump(fixture, f, indent=1)
                f.write("\n")
            counts = [len(s) for s in fixture["forwards"]]
            closest = ", ".join(f"{k} {v:.3g}" for k, v in fixture["diagnostics"].items())
            print(f"{name}: {len(counts)} forwards, commits {counts}; {closest}")


if __name__ == "__main__":
    main()
