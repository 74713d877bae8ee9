"""Bad input raises typed exceptions naming what is wrong (include/dlm/core/error.hpp's classes)."""

import json
import shutil

import numpy as np
import pytest

import dlm


def test_an_unknown_preset_names_the_preset_and_lists_the_known_ones(llm):
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate("hi", "fastest")
    assert e.value.parameter == "preset" and "cdlm" in e.value.rule
    assert isinstance(e.value, ValueError)


def test_an_option_the_preset_lacks_is_named(llm):
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate("hi", "cdlm", steps=4)
    assert e.value.parameter == "steps" and "does not apply to the cdlm preset" in e.value.rule


def test_a_block_length_that_does_not_divide_names_both_lengths(llm):
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate("hi", "llada", block_length=7)
    assert e.value.parameter == "block_length" and "48" in str(e.value)


def test_an_out_of_range_value_and_an_unknown_option_are_refused(llm):
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate("hi", "cdlm", threshold=1.5)
    assert e.value.parameter == "threshold"
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate("hi", "cdlm", treshold=0.5)
    assert e.value.parameter == "treshold"
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate("hi", "dream", algorithm="best")
    assert e.value.parameter == "algorithm"
    for seed in (-1, 1 << 64, 1.5, "7"):  # the engine's seeds are 64-bit unsigned integers
        with pytest.raises(dlm.InvalidParameter) as e:
            llm.generate("hi", seed=seed)
        assert e.value.parameter == "seed"
        with pytest.raises(dlm.InvalidParameter) as e:
            llm.engine().add("hi", seed=seed)
        assert e.value.parameter == "seed"
    assert llm.generate("hi", seed=(1 << 64) - 1)[0].finish_reason in ("stop", "length")


def test_a_token_outside_the_vocabulary_is_refused_before_the_forward(llm):
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.forward([1, 2, llm.model.vocab_size + 5])
    assert e.value.parameter == "tokens" and "outside the vocabulary" in e.value.rule
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.forward([1, 2], mask="sideways")
    assert e.value.parameter == "mask"


def test_a_forward_longer_than_the_models_context_is_refused_before_its_logits_are_allocated(llm):
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.forward([1] * 100_000)
    assert e.value.parameter == "tokens" and "context" in str(e.value)
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.forward([])
    assert e.value.parameter == "tokens"


def test_guidance_and_threads_are_named_as_python_spells_them(models, llm):
    for cfg in (-1.0, float("nan"), 1e39, 2e6):
        with pytest.raises(dlm.InvalidParameter) as e:
            llm.generate("hi", "llada", cfg=cfg)
        assert e.value.parameter == "cfg" and "'cfg'" in str(e.value)
    with pytest.raises(dlm.InvalidParameter) as e:  # an exact cache has no unconditional canvas to guide with
        llm.engine("cdlm").add("hi", cfg=1.0)
    assert e.value.parameter == "cfg"
    for threads in (0, -1, 1.5, 1_000_000, 2**40):
        with pytest.raises(dlm.InvalidParameter) as e:
            dlm.LLM(models / "cdlm", threads=threads)
        assert e.value.parameter == "threads" and f"[1, {dlm._dlm.max_threads}]" in e.value.rule


def test_a_missing_model_folder_names_the_path(tmp_path):
    with pytest.raises(dlm.FileError) as e:
        dlm.LLM(tmp_path / "nowhere")
    assert e.value.path == str(tmp_path / "nowhere")
    assert isinstance(e.value, OSError)


def test_a_truncated_checkpoint_names_the_file(models, tmp_path):
    folder = tmp_path / "broken"
    shutil.copytree(models / "cdlm", folder)
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(dlm.FileError) as e:
        dlm.LLM(folder)
    assert "model.safetensors" in e.value.path


def test_a_bad_dtype_is_named(models):
    with pytest.raises(dlm.InvalidParameter) as e:
        dlm.LLM(models / "cdlm", dtype="f8")
    assert e.value.parameter == "dtype"


def test_a_bad_kv_type_is_named(models):
    with pytest.raises(dlm.InvalidParameter) as e:
        dlm.LLM(models / "cdlm", kv="f16")
    assert e.value.parameter == "kv"


def test_the_load_reports_its_progress_and_an_exception_raised_there_ends_it(models):
    calls = []
    dlm.LLM(models / "cdlm", progress=lambda done, total: calls.append((done, total)))
    assert len(calls) >= 3  # the embedding, each layer, the end
    assert len({total for _, total in calls}) == 1 and calls[-1][0] == calls[-1][1]
    assert all(later[0] > earlier[0] for earlier, later in zip(calls, calls[1:]))

    def interrupt(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        dlm.LLM(models / "cdlm", progress=interrupt)
    with pytest.raises(dlm.InvalidParameter) as e:
        dlm.LLM(models / "cdlm", progress=3)
    assert e.value.parameter == "progress"


def test_forward_and_decode_name_tokens_for_an_id_outside_the_vocabulary(llm):
    vocab = llm.model.vocab_size
    for call, bad in ((llm.forward, [-1]), (llm.decode, [10**6]), (llm.decode, [-1]), (llm.forward, [2**40])):
        with pytest.raises(dlm.InvalidParameter) as e:
            call(bad)
        assert e.value.parameter == "tokens", call
        assert str(bad[0]) in e.value.rule and f"[0, {vocab})" in e.value.rule
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.forward("abc")
    assert e.value.parameter == "tokens"
    assert llm.decode(llm.encode("What is 3 + 4?")) == "What is 3 + 4?"


@pytest.mark.parametrize("kv", ["", 0, 1, False, "BF16"])
def test_a_kv_other_than_f32_bf16_or_none_is_refused_naming_kv(models, kv):
    with pytest.raises(dlm.InvalidParameter) as e:
        dlm.LLM(models / "cdlm", kv=kv)
    assert e.value.parameter == "kv" and "'f32', 'bf16'" in e.value.rule


@pytest.mark.parametrize("dtype", ["", 0, "keep", True])
def test_a_dtype_other_than_its_names_or_none_is_refused_naming_dtype(models, dtype):
    with pytest.raises(dlm.InvalidParameter) as e:
        dlm.LLM(models / "cdlm", dtype=dtype)
    assert e.value.parameter == "dtype"


def test_a_diffusion_gemma_folder_refuses_a_bf16_kv_cache_naming_kv(diffusion_gemma):
    with pytest.raises(dlm.InvalidParameter) as e:
        dlm.LLM(diffusion_gemma, kv="bf16")
    assert e.value.parameter == "kv" and "f32 K/V" in e.value.rule


@pytest.mark.parametrize("preset, option, value", [
    ("cdlm", "gen_length", 2**40), ("cdlm", "gen_length", True), ("cdlm", "gen_length", 8.0), ("cdlm", "block_length", 2**33),
    ("fast-dllm", "top_k", 2**31), ("cdlm", "threshold", "0.5"), ("cdlm", "threshold", True), ("llada", "algorithm", 3),
    ("llada", "steps", 0), ("llada", "steps", "8"), ("fast-dllm", "temperature", 1e30), ("fast-dllm", "temperature", float("inf")),
    ("fast-dllm", "top_p", "0.9")])
def test_an_option_of_the_wrong_type_or_out_of_range_is_named(llm, preset, option, value):
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.settings(preset, **{option: value})
    assert e.value.parameter == option and not isinstance(e.value, TypeError)


def test_a_value_in_range_that_the_samplers_float_holds_outside_it_is_named(llm):
    # top_p 1e-50 is 0 as a float: refused as dlm-generate --top-p 1e-50 is, saying so; temperature 1e-50 is 0, in range.
    with pytest.raises(dlm.InvalidParameter, match=r"is 1e-50, which the sampler's float holds as 0.0, outside \(0, 1\]") as e:
        llm.settings("fast-dllm", top_p=1e-50)
    assert e.value.parameter == "top_p"
    assert llm.settings("fast-dllm", temperature=1e-50).temperature == 0


def test_steps_and_temperature_take_the_bounds_dlm_generate_takes(llm):
    # dlm-generate refuses --steps 0 and --temp above 1e6 (cli/bounds.hpp); so does the package.
    with pytest.raises(dlm.InvalidParameter, match=r"must be in \[1, 16777216\], got 0"):
        llm.settings("llada", steps=0)
    with pytest.raises(dlm.InvalidParameter, match=r"must be in \[0, 1000000\]"):
        llm.settings("fast-dllm", temperature=1e6 + 1)
    assert llm.settings("fast-dllm", temperature=1e6).temperature == 1e6
    assert llm.settings("fast-dllm", threshold=np.float32(0.5), gen_length=np.int64(16)).gen_length == 16


def test_a_schedule_guidance_or_prompt_of_the_wrong_type_is_named(llm):
    for kwargs, name in ((dict(schedule=5), "schedule"), (dict(cfg="x"), "cfg"), (dict(preset=5), "preset")):
        with pytest.raises(dlm.InvalidParameter) as e:
            llm.generate("hi", **kwargs)
        assert e.value.parameter == name
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate([[2**31]])
    assert e.value.parameter == "prompts[0]" and "outside the vocabulary" in e.value.rule
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.engine().add([1, True])
    assert e.value.parameter == "prompt"
    # Bytes iterate as byte values and a dict as its keys: neither passes for token ids or text.
    for prompts, name in ((b"hello", "prompts"), (bytearray(b"hi"), "prompts"), ({"a": 1}, "prompts"), ([b"hi"], "prompts[0]")):
        with pytest.raises(dlm.InvalidParameter) as e:
            llm.generate(prompts)
        assert e.value.parameter == name, prompts
    with pytest.raises(dlm.InvalidParameter) as e:
        list(llm.stream(b"hello"))
    assert e.value.parameter == "prompts"
    for prompts in ("What is 3 + 4?", b"hi", {"a": 1}):  # add_batch takes a list: a text would be one prompt per character
        with pytest.raises(dlm.InvalidParameter) as e:
            llm.engine().add_batch(prompts)
        assert e.value.parameter == "prompts"


def test_text_utf8_cannot_carry_and_a_bytes_path_are_refused_by_name(llm, models):
    for call, name in ((lambda: llm.generate("a\ud800b"), "prompts[0]"), (lambda: llm.encode("a\udfffb"), "text"),
                       (lambda: llm.engine().add("\ud800"), "prompt"),
                       (lambda: llm.apply_chat_template([{"role": "user", "content": "\ud800"}]), "messages[0].content")):
        with pytest.raises(dlm.InvalidParameter) as e:
            call()
        assert e.value.parameter == name and "lone surrogate" in e.value.rule
    with pytest.raises(dlm.InvalidParameter) as e:
        dlm.LLM(str(models / "cdlm").encode())
    assert e.value.parameter == "model"


def test_a_tiny_temperature_samples_its_greedy_limit_and_never_fails(llm):
    greedy = llm.generate("What is 3 + 4?", "llada", temperature=0)[0]
    for preset in ("llada", "dream"):
        for t in (1e-40, 1e-45):
            out = llm.generate("What is 3 + 4?", preset, temperature=t, seed=1)[0]
            assert out.finish_reason != "error", (preset, t, out.result.message if out.result else "")
            if preset == "llada":
                assert out.tokens.tolist() == greedy.tokens.tolist(), t


def test_a_gen_length_longer_than_the_context_is_named_and_a_long_prompt_is_told_its_room(models, llm):
    context = json.loads((models / "cdlm" / "config.json").read_text())["max_sequence_length"]
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate("hi", "cdlm", gen_length=context, block_length=8)
    assert e.value.parameter == "gen_length" and f"model's context of {context}" in e.value.rule
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate([5] * 10, "cdlm", gen_length=context - 8, block_length=8)
    assert e.value.parameter == "prompts[0]"
    assert e.value.rule.endswith(f"beside gen_length {context - 8} a prompt may hold 8 tokens at most")


def test_a_long_text_prompt_is_tokenized_only_as_far_as_the_context_takes_it_and_refused_by_name(models, llm):
    # ~1 MiB of words: the encode stops past the most a prompt may hold beside gen_length (tokenizing it
    # whole and counting would say "prompt length 524288"), for generate's prompts, an engine's add and
    # LLM.chat's conversations (the cdlm student has no chat template: its conversation is the contents).
    context = json.loads((models / "cdlm" / "config.json").read_text())["max_sequence_length"]
    text, room = "x " * (1 << 19), context - 48
    rule = (f"prompt length more than {room} + gen_length 48 exceeds the model's context of {context}: "
            f"beside gen_length 48 a prompt may hold {room} tokens at most")
    for call, name in ((lambda: llm.generate(["hi", text], "cdlm", gen_length=48, block_length=8), "prompts[1]"),
                       (lambda: llm.engine("cdlm", gen_length=48, block_length=8).add(text), "prompt"),
                       (lambda: llm.engine("cdlm").add(text, gen_length=48, block_length=8), "prompt"),
                       (lambda: llm.chat([{"role": "user", "content": text}], "cdlm", gen_length=48, block_length=8), "messages"),
                       (lambda: llm.chat([[{"role": "user", "content": "hi"}], [{"role": "user", "content": text}]], "cdlm",
                                         gen_length=48, block_length=8), "messages[1]")):
        with pytest.raises(dlm.InvalidParameter) as e:
            call()
        assert e.value.parameter == name and e.value.rule == rule
    assert len(llm.encode(text)) > 1000 * context  # encode, the tokenizer's own call, stays whole


def test_fast_dllm_v2_on_a_model_without_shifted_logits_is_refused_naming_the_preset(llm):
    assert not llm.model.logits_shift
    for preset in ("fast-dllm-v2", "fast-dllm-v2-block-cache"):
        with pytest.raises(dlm.InvalidParameter) as e:
            llm.settings(preset)
        assert e.value.parameter == "preset" and f"the {preset} preset does not fit this model" in e.value.rule


def test_stop_at_eos_belongs_to_a_python_schedule_and_is_refused_without_one(llm):
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate("hi", "cdlm", stop_at_eos=False)
    assert e.value.parameter == "stop_at_eos" and "schedule written in Python" in e.value.rule
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate("hi", "cdlm", schedule=lambda s: [0], stop_at_eos="no")
    assert e.value.parameter == "stop_at_eos"
    out = llm.generate("hi", "cdlm", gen_length=16, schedule=lambda s: list(range(len(s))), stop_at_eos=False)[0]
    assert out.finish_reason in ("stop", "length")


def test_chat_and_think_are_refused_with_token_id_prompts_naming_them(llm):
    ids = llm.encode("What is 3 + 4?")
    for kwargs, name in ((dict(chat=True), "chat"), (dict(chat=True, think=True), "chat"), (dict(think=True), "think")):
        with pytest.raises(dlm.InvalidParameter) as e:
            llm.generate(ids, **kwargs)
        assert e.value.parameter == name and "token ids" in e.value.rule
        with pytest.raises(dlm.InvalidParameter) as e:
            llm.engine().add(ids, **kwargs)
        assert e.value.parameter == name
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.generate("What is 3 + 4?", think=True)
    assert e.value.parameter == "think"

