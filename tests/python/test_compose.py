"""Policies composed by name (mask=, cache=, schedule=, sampler=): the names are the library's table
(dlm.policies()), a composition equal to a preset decodes exactly as the preset, options apply as
they do to a preset, and what the decoder refuses is refused by axis, never a crash."""

import pytest

import dlm

PROMPTS = ["There are 8 cups with 5 marbles in each. How many marbles are there now?",
           "Tom has 3 apples. He buys 4 more. How many apples does he have now?"]


def test_the_policy_names_are_the_librarys_table_with_a_line_each(llm):
    table = dlm.policies()
    assert list(table) == ["mask", "cache", "schedule", "sampler"]
    for axis, rows in table.items():
        names = [n for n, _ in rows]
        assert len(names) == len(set(names)) and all(d for _, d in rows), axis
    # Every preset's policies are rows of the table (the presets that fit the model: diffusion-gemma is
    # refused for it, naming the preset, as dlm-generate refuses it).
    for preset, _ in dlm.presets():
        try:
            policies = llm.settings(preset).policies
        except dlm.InvalidParameter as e:
            # fast-dllm-v2's schedule needs shifted logits, which this model does not have
            assert preset in ("diffusion-gemma", "fast-dllm-v2", "fast-dllm-v2-block-cache") and e.parameter == "preset", preset
            continue
        for axis, name in policies.items():
            assert name in [n for n, _ in table[axis]], (preset, axis, name)
    assert "entropy_bound" in [n for n, _ in table["schedule"]]
    assert llm.settings("cdlm").policies == {"mask": "block_causal", "cache": "prefix", "schedule": "cdlm", "sampler": "greedy"}


# (preset, options): sampling options and a seed where the preset's sampler draws.
CASES = [("cdlm", {}), ("cdlm", {"threshold": 0.6, "block_length": 16}), ("llada", {"steps": 24, "temperature": 0.7, "seed": 3}),
         ("fast-dllm", {"threshold": 0.8}), ("fast-dllm-dual", {}), ("cd4lm", {"temperature": 0.5, "seed": 9}),
         ("dream", {"steps": 24}), ("autoregressive", {}), ("cdlm-edit", {})]


@pytest.mark.parametrize("preset,options", CASES)
def test_a_composition_equal_to_a_preset_gives_the_presets_tokens(llm, preset, options):
    names = llm.settings(preset).policies
    try:
        want = llm.generate(PROMPTS, preset, **options)
    except dlm.InvalidParameter as e:  # the model refuses the preset: the composition is refused alike
        with pytest.raises(dlm.InvalidParameter) as got:
            llm.generate(PROMPTS, **names, **options)
        assert got.value.parameter == e.parameter
        return
    composed = llm.settings(**names, **options)
    assert composed.composed and not llm.settings(preset, **options).composed
    assert composed.describe().split(":", 1)[1] == llm.settings(preset, **options).describe().split(":", 1)[1]
    got = llm.generate(PROMPTS, **names, **options)
    for w, g in zip(want, got):
        assert g.slots.tolist() == w.slots.tolist()
        assert g.commit_forward.tolist() == w.commit_forward.tolist()
        assert g.text == w.text and g.stats.forwards == w.stats.forwards


def test_at_least_three_presets_decode_on_the_shipped_model(llm):
    decoded = 0
    for preset in ("cdlm", "llada", "fast-dllm", "cd4lm"):
        out = llm.generate(PROMPTS[0], **llm.settings(preset).policies)[0]
        decoded += out.finish_reason in ("stop", "length")
    assert decoded >= 3


def test_naming_one_axis_keeps_the_presets_others(llm):
    s = llm.settings("cdlm", sampler="categorical", temperature=0.8, seed=4)
    assert s.policies == {"mask": "block_causal", "cache": "prefix", "schedule": "cdlm", "sampler": "categorical"}
    assert (s.temperature, s.threshold, s.source("threshold")) == (pytest.approx(0.8), 0.9, "preset")
    a = llm.generate(PROMPTS[0], "cdlm", sampler="categorical", temperature=0.8, seed=4)[0]
    b = llm.generate(PROMPTS[0], "cdlm", sampler="categorical", temperature=0.8, seed=4)[0]
    assert a.slots.tolist() == b.slots.tolist()
    # The model's default preset supplies what is not named.
    assert llm.settings(schedule="threshold").policies["mask"] == llm.settings().policies["mask"]


def test_options_apply_as_to_a_preset_and_are_refused_by_axis(llm):
    s = llm.settings(mask="semi_ar", cache="none", schedule="llada", sampler="llada", steps=24, block_length=8)
    assert (s.steps, s.block_length, s.source("steps")) == (24, 8, "user")
    assert s.describe().startswith("semi_ar + none + llada + llada: gen 48, block 8, steps 24")
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.settings(mask="block_causal", cache="prefix", schedule="threshold", sampler="greedy", steps=4)
    assert e.value.parameter == "steps" and "schedules that take it: llada, dream" in e.value.rule
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.settings("cdlm", schedule="threshold", temperature=0.5)
    assert e.value.parameter == "temperature" and "samplers that take it: categorical, llada, sdar" in e.value.rule
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.settings("cdlm", schedule="threshold", threshold=1.5)
    assert e.value.parameter == "threshold"
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate(PROMPTS[0], "cdlm", schedule="threshold", block_length=7)
    assert e.value.parameter == "block_length" and "48" in e.value.rule


def test_unknown_names_are_refused_naming_the_axis(llm):
    for axis in ("mask", "cache", "schedule", "sampler"):
        with pytest.raises(dlm.InvalidParameter) as e:
            llm.settings(**{axis: "no-such-policy"})
        assert e.value.parameter == axis and "one of" in e.value.rule
    assert llm.settings(mask="block-causal", cache="approx-prefix").policies["cache"] == "approx_prefix"


def test_every_mask_and_cache_pair_decodes_or_is_refused_by_axis(llm):
    table = dlm.policies()
    refused = decoded = 0
    for mask, _ in table["mask"]:
        for cache, _ in table["cache"]:
            try:
                out = llm.generate(PROMPTS[0], mask=mask, cache=cache, schedule="threshold", sampler="greedy")[0]
            except dlm.InvalidParameter as e:
                assert e.parameter == "cache", (mask, cache, str(e))
                assert "exact KV cache" in e.rule
                refused += 1
                continue
            assert out.finish_reason in ("stop", "length"), (mask, cache, out.message)
            decoded += 1
    assert refused == 2 and decoded == 23  # prefix under semi_ar and bidirectional: the decoder's static_assert
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate(PROMPTS[0], "cdlm", cache="sub_block", schedule="llada21")
    assert e.value.parameter == "cache" and "revising schedule" in e.value.rule


def test_a_python_schedule_runs_over_a_preset_not_over_named_policies(llm):
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate(PROMPTS[0], mask="block_causal", schedule=lambda s: [0])
    assert e.value.parameter == "schedule"
