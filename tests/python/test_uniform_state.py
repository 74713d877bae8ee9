"""A DiffusionGemma folder (uniform-state diffusion) in Python: loaded as what it is, decoded with its
own preset exactly as dlm-generate decodes it (Gemma 4's chat format with thinking on and off too),
batched and streamed as alone, and what does not apply to it refused by name."""

import subprocess

import pytest

import dlm

PROMPT = "Tom has 3 apples"
FLAGS = dict(gen_length=32, steps=6)


def cli_answer(dlm_generate, folder, *extra):
    p = subprocess.run([dlm_generate, "-m", str(folder), "-p", PROMPT, "-n", "32", "--steps", "6", *extra],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout[:-1]


@pytest.fixture(scope="module")
def gemma(diffusion_gemma):
    return dlm.LLM(diffusion_gemma)


def test_the_folder_loads_as_diffusion_gemma_with_its_own_preset(gemma):
    assert gemma.model.uniform_state and gemma.model.architecture == "DiffusionGemmaForBlockDiffusion"
    assert gemma.default_preset == "diffusion-gemma"
    s = gemma.settings(**FLAGS)
    assert s.preset == "diffusion-gemma" and s.steps == 6 and s.gen_length == 32


def test_answers_equal_dlm_generates_plain_chat_and_thinking(gemma, diffusion_gemma, dlm_generate):
    answers = []
    for chat, think, extra in ((False, None, []), (True, None, ["--chat"]), (True, True, ["--chat", "--think"])):
        want = cli_answer(dlm_generate, diffusion_gemma, *extra)
        got = gemma.generate(PROMPT, chat=chat, think=think, **FLAGS)[0]
        assert got.text == want, f"chat={chat} think={think}"
        assert got.finish_reason in ("stop", "length")
        answers.append(want)
    assert answers[1] != answers[2], "the thinking turn changes the prompt, so the answers should differ here"
    assert gemma.encode(PROMPT, chat=True, think=True) != gemma.encode(PROMPT, chat=True)


def test_sequences_joining_a_running_batch_and_a_stream_decode_each_prompt_as_alone(gemma):
    prompts = [PROMPT, "How many legs do 2 cats have?"]
    eng = gemma.engine(**FLAGS)
    a = eng.add(prompts[0], seed=3)
    eng.step()
    b = eng.add(prompts[1], seed=4)  # joins after the first's first step
    outs = {}
    while not eng.idle:
        eng.step()
        outs.update((o.id, o) for o in eng.finished())
    for seq, prompt, seed in ((a, prompts[0], 3), (b, prompts[1], 4)):
        alone = gemma.generate(prompt, seed=seed, **FLAGS)[0]
        assert outs[seq].slots.tolist() == alone.slots.tolist()
        assert outs[seq].stats.forwards == alone.stats.forwards
    batch = gemma.generate(prompts, seed=9, **FLAGS)
    texts = {}
    for d in gemma.stream(prompts, seed=9, **FLAGS):
        texts[d.index] = texts.get(d.index, "") + d.text
    assert [texts[0], texts[1]] == [o.text for o in batch]


def test_what_does_not_apply_to_a_uniform_state_model_is_refused_by_name(gemma):
    with pytest.raises(dlm.InvalidParameter) as e:
        gemma.generate(PROMPT, "cdlm")
    assert e.value.parameter == "preset"
    with pytest.raises(dlm.InvalidParameter) as e:
        gemma.generate(PROMPT, schedule=lambda step: [0], **FLAGS)
    assert e.value.parameter == "schedule"
    with pytest.raises(dlm.InvalidParameter) as e:
        gemma.generate(PROMPT, mask="block_causal")
    assert e.value.parameter == "mask"
    with pytest.raises(dlm.InvalidParameter) as e:
        gemma.forward(gemma.encode(PROMPT))
    assert e.value.parameter == "model"
    with pytest.raises(dlm.InvalidParameter) as e:
        gemma.encode(PROMPT, think=True)
    assert e.value.parameter == "think"
