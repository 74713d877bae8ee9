"""Bad input raises typed exceptions naming what is wrong (include/dlm/core/error.hpp's classes)."""

import shutil

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
    assert "canvas" in e.value.parameter and "outside the vocabulary" in e.value.rule
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
    for cfg in (-1.0, float("nan")):
        with pytest.raises(dlm.InvalidParameter) as e:
            llm.generate("hi", "llada", cfg=cfg)
        assert e.value.parameter == "cfg" and "'cfg'" in str(e.value)
    with pytest.raises(dlm.InvalidParameter) as e:  # an exact cache has no unconditional canvas to guide with
        llm.engine("cdlm").add("hi", cfg=1.0)
    assert e.value.parameter == "cfg"
    for threads in (0, -1, 1.5, 1_000_000):
        with pytest.raises(dlm.InvalidParameter) as e:
            dlm.LLM(models / "cdlm", threads=threads)
        assert e.value.parameter == "threads"


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
