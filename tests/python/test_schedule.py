"""A schedule written in Python: the threshold rule reimplemented gives exactly the cdlm preset's
tokens; what it sees; and its exceptions reaching the caller unchanged."""

import itertools

import numpy as np
import pytest

import dlm

PROMPTS = ["There are 8 cups with 5 marbles in each. How many marbles are there now?", "What is 3 + 4?"]


def threshold_rule(tau):
    """Fast-dLLM's / CDLM's rule (include/dlm/schedule/threshold.hpp): every candidate whose confidence
    is >= tau, and always the most confident one (the first of equals)."""
    tau32 = np.float32(tau)

    def select(step):
        p = step.probability
        best = int(np.argmax(p))
        return [i for i in range(len(p)) if i == best or p[i] >= tau32]

    return select


@pytest.mark.parametrize("threshold", [0.9, 0.6])
def test_a_python_threshold_rule_gives_the_cdlm_presets_tokens(llm, threshold):
    native = llm.generate(PROMPTS, "cdlm", threshold=threshold)
    python = llm.generate(PROMPTS, "cdlm", schedule=threshold_rule(threshold))
    for a, b in zip(native, python):
        assert b.slots.tolist() == a.slots.tolist()
        assert b.commit_forward.tolist() == a.commit_forward.tolist()
        assert b.stats.forwards == a.stats.forwards
        assert b.text == a.text


def test_a_different_python_rule_decodes_differently(llm):
    one_per_step = llm.generate(PROMPTS[0], "cdlm", schedule=lambda s: [int(np.argmax(s.probability))])[0]
    native = llm.generate(PROMPTS[0], "cdlm")[0]
    assert one_per_step.stats.forwards > native.stats.forwards
    assert one_per_step.stats.committed == one_per_step.stats.forwards


def test_the_schedule_sees_the_active_blocks_candidates(llm):
    seen = []

    def record(step):
        seen.append((len(step), step.block, step.step_in_block, step.block_begin, step.block_end, step.position.tolist()))
        return range(len(step))  # commit everything: one forward per block

    out = llm.generate(PROMPTS[0], "cdlm", schedule=record, stop_at_eos=False)[0]
    block = llm.settings("cdlm").block_length
    assert len(seen) == out.stats.forwards == len(out.slots) // block
    for n, b, step_in_block, begin, end, positions in seen:
        assert step_in_block == 0 and n == block == end - begin
        assert positions == list(range(begin, end))


def test_an_exception_in_the_schedule_reaches_the_caller(llm):
    def broken(step):
        raise ZeroDivisionError("a bug in my rule")

    with pytest.raises(ZeroDivisionError, match="a bug in my rule"):
        llm.generate(PROMPTS[0], "cdlm", schedule=broken)
    # the model and package still work afterwards
    assert llm.generate(PROMPTS[0], "cdlm")[0].finish_reason in ("stop", "length")


def test_a_schedule_breaking_the_contract_fails_its_sequence_only(llm):
    out = llm.generate(PROMPTS[0], "cdlm", schedule=lambda s: [len(s) + 3])[0]
    assert out.finish_reason == "error" and "chose candidate" in out.message
    with pytest.raises(dlm.ContractError):
        out.result.raise_if_failed()
    with pytest.raises(dlm.ContractError, match="iterable of candidate indices"):
        llm.generate(PROMPTS[0], "cdlm", schedule=lambda s: ["first"])[0].result.raise_if_failed()
    with pytest.raises(TypeError):  # not iterable: Python's own error, raised by the step
        llm.generate(PROMPTS[0], "cdlm", schedule=lambda s: 3)
    with pytest.raises(dlm.ContractError, match="iterable of candidate indices"):  # a bool is no index
        llm.generate(PROMPTS[0], "cdlm", schedule=lambda s: [True])[0].result.raise_if_failed()
    endless = llm.generate(PROMPTS[0], "cdlm", schedule=lambda s: itertools.count())[0]  # read up to the candidates, then refused
    assert endless.finish_reason == "error" and "more indices than the" in endless.message


def test_a_preset_whose_cache_needs_sub_blocks_refuses_a_python_schedule(fast_dllm_v2):
    # On a model that fits the preset (shifted logits: Fast-dLLM v2's own); on another the preset itself
    # is refused first (test_errors.py).
    v2 = dlm.LLM(fast_dllm_v2)
    for preset in ("fast-dllm-v2", "fast-dllm-v2-block-cache"):
        with pytest.raises(dlm.InvalidParameter) as e:
            v2.generate(PROMPTS[0], preset, schedule=threshold_rule(0.9))
        assert e.value.parameter == "schedule"


def test_an_option_of_the_schedule_a_python_callable_replaces_is_refused_not_ignored(llm):
    """threshold belongs to cdlm's schedule and steps to llada's: with schedule= a callable, neither would be read."""
    for preset, option in (("cdlm", dict(threshold=0.5)), ("llada", dict(steps=6))):
        with pytest.raises(dlm.InvalidParameter) as e:
            llm.generate(PROMPTS[0], preset, schedule=lambda s: [0], **option)
        assert e.value.parameter == next(iter(option)) and "schedule= replaces" in e.value.rule
    # The mask's and the sampler's options still apply.
    out = llm.generate(PROMPTS[0], "llada", schedule=lambda s: [0], block_length=16, temperature=0.5, seed=1)[0]
    assert out.finish_reason in ("stop", "length")
