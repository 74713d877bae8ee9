"""The package decodes as dlm-generate does: every preset of the registry on every shipped model, the
same answer text (or the same refusal), and streaming deltas that concatenate to that answer."""

import re
import subprocess

import pytest

import dlm

PROMPT = "There are 8 cups with 5 marbles in each. How many marbles are there now?"
MODELS = ["cdlm", "cd4lm", "teacher", "ar"]
PRESETS = [name for name, _ in dlm.presets()]


def cli_answer(dlm_generate, model, preset):
    """dlm-generate's answer (stdout without its newline), or its error: ("refused", the parameter it
    names, as the registry names it) or ("failed", the message)."""
    p = subprocess.run([dlm_generate, "-m", str(model), "--preset", preset, "-p", PROMPT], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        refused = re.search(r"invalid parameter '([^']+)'", p.stderr)
        if refused:  # a flag ("--block-length") is the CLI's spelling of an option ("block_length")
            return None, ("refused", refused.group(1).lstrip("-").replace("-", "_"))
        return None, ("failed", p.stderr.strip().removeprefix("dlm-generate: "))
    assert p.stdout.endswith("\n")
    return p.stdout[:-1], None


@pytest.mark.parametrize("model", MODELS)
def test_every_preset_answers_as_dlm_generate(models, dlm_generate, model):
    llm = dlm.LLM(models / model)
    answered = 0
    for preset in PRESETS:
        expected, error = cli_answer(dlm_generate, models / model, preset)
        if error and error[0] == "refused":
            with pytest.raises(dlm.InvalidParameter) as e:
                llm.generate(PROMPT, preset)
            assert e.value.parameter == error[1], f"{model} / {preset}"
            continue
        if error:  # the decode itself failed in dlm-generate: the same sequence fails here, alone
            out = llm.generate(PROMPT, preset)[0]
            assert (out.finish_reason, out.message) == ("error", error[1]), f"{model} / {preset}"
            continue
        out = llm.generate(PROMPT, preset)[0]
        assert out.text == expected, f"{model} / {preset}"
        assert out.finish_reason in ("stop", "length")
        assert len(out.slots) == len(out.commit_forward) == len(out.commit_confidence)
        answered += 1
    assert answered >= 2, "some presets decode every shipped model (the comparison is not vacuous)"


def test_the_default_preset_is_the_models_and_matches_dlm_generate(models, dlm_generate, llm):
    p = subprocess.run([dlm_generate, "-m", str(models / "cdlm"), "-p", PROMPT], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert llm.default_preset == "cdlm"
    assert llm.generate(PROMPT)[0].text == p.stdout[:-1]


@pytest.mark.parametrize("preset", ["cdlm", "llada"])
def test_a_bf16_kv_cache_answers_as_dlm_generate_with_kv_bf16(models, dlm_generate, preset):
    p = subprocess.run([dlm_generate, "-m", str(models / "cdlm"), "--kv", "bf16", "--preset", preset, "-p", PROMPT], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = dlm.LLM(models / "cdlm", kv="bf16").generate(PROMPT, preset)[0]
    assert out.text == p.stdout[:-1]
    assert out.finish_reason in ("stop", "length")


@pytest.mark.parametrize("preset", ["cdlm", "llada", "fast-dllm", "cd4lm", "dream"])
def test_streaming_deltas_concatenate_to_the_answer(llm, preset):
    whole = llm.generate(PROMPT, preset)[0]
    deltas = list(llm.stream(PROMPT, preset))
    assert "".join(d.text for d in deltas) == whole.text
    assert deltas[-1].output is not None and deltas[-1].output.text == whole.text
    tokens = [t for d in deltas for t in d.tokens.tolist()]
    assert tokens == whole.slots.tolist()
    assert len(deltas) > 1, "an answer arrives in more than one piece"


def test_streaming_canvases_show_every_step(llm):
    whole = llm.generate(PROMPT, "cdlm")[0]
    deltas = list(llm.stream(PROMPT, "cdlm", canvases=True))
    assert len(deltas) == whole.stats.forwards
    prompt_len = len(whole.prompt_tokens)
    masked = [int((d.canvas[prompt_len:] == llm.model.mask_id).sum()) for d in deltas]
    assert masked == sorted(masked, reverse=True) and masked[-1] == 0


def test_a_batch_decodes_each_prompt_as_alone(llm):
    prompts = [PROMPT, "What is 3 + 4?", llm.encode("How many legs do 2 cats have?")]
    batch = llm.generate(prompts, "cdlm", seed=5)
    alone = [llm.generate(p, "cdlm", seed=s)[0] for p, s in zip(prompts, [o.result.seed for o in batch])]
    assert [o.text for o in batch] == [o.text for o in alone]
    assert [o.id for o in batch] == sorted(o.id for o in batch)


def test_sampling_options_and_seed_are_the_registrys(llm):
    a = llm.generate(PROMPT, "llada", temperature=0.8, seed=3)[0]
    b = llm.generate(PROMPT, "llada", temperature=0.8, seed=3)[0]
    assert a.text == b.text
    s = llm.settings("fast-dllm", threshold=0.7, block_length=16)
    assert (s.preset, s.threshold, s.block_length, s.source("threshold"), s.source("gen_length")) == ("fast-dllm", 0.7, 16, "user", "model")


@pytest.mark.parametrize("preset", ["cdlm", "llada"])
def test_streaming_several_prompts_tags_each_delta_with_its_prompt(llm, preset):
    prompts = [PROMPT, "Tom has 3 apples. He buys 4 more. How many apples does he have now?", llm.encode("What is 3 + 4?")]
    whole = llm.generate(prompts, preset, seed=7)
    deltas = list(llm.stream(prompts, preset, seed=7))
    assert {d.index for d in deltas} == {0, 1, 2}
    for i, out in enumerate(whole):
        mine = [d for d in deltas if d.index == i]
        assert "".join(d.text for d in mine) == out.text
        assert [t for d in mine for t in d.tokens.tolist()] == out.slots.tolist()
        assert mine[-1].output is not None and mine[-1].output.text == out.text
        assert all(d.output is None for d in mine[:-1])
    # A list of one prompt streams as the prompt alone.
    assert [d.text for d in llm.stream([PROMPT], preset, seed=7)] == [d.text for d in llm.stream(PROMPT, preset, seed=7)]


def test_the_editing_threshold_reaches_the_schedule_as_dlm_generates_flag(models, dlm_generate):
    teacher = dlm.LLM(models / "teacher")
    answers = {}
    for threshold in (0.0, 0.9):
        p = subprocess.run([dlm_generate, "-m", str(models / "teacher"), "--preset", "cdlm-edit", "--editing-threshold", str(threshold), "-p",
                            PROMPT], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        out = teacher.generate(PROMPT, "cdlm-edit", editing_threshold=threshold)[0]
        assert out.text == p.stdout[:-1]
        assert teacher.settings("cdlm-edit", editing_threshold=threshold).editing_threshold == threshold
        answers[threshold] = (out.slots.tolist(), out.stats.forwards)
    assert answers[0.0] != answers[0.9], "editing at any confidence and only above 0.9 decode alike here: the test could not tell"
    with pytest.raises(dlm.InvalidParameter) as e:
        teacher.generate(PROMPT, "cdlm", editing_threshold=0.5)
    assert e.value.parameter == "editing_threshold"
