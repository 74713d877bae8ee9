"""The step-wise engine (add, step, cancel, finished) and the model's forward as numpy."""

import threading
import time

import numpy as np
import pytest

import dlm

PROMPT = "What is 3 + 4?"


def test_the_engine_joins_sequences_between_steps_and_decodes_each_as_generate(llm):
    eng = llm.engine("cdlm")
    a = eng.add(PROMPT, seed=1)
    eng.step()
    b = eng.add("How many legs do 2 cats have?", seed=2)  # joins a running batch
    outs = {}
    while not eng.idle:
        eng.step()
        for o in eng.finished():
            outs[o.id] = o
    assert outs[a].text == llm.generate(PROMPT, "cdlm", seed=1)[0].text
    assert outs[b].text == llm.generate("How many legs do 2 cats have?", "cdlm", seed=2)[0].text
    assert eng.stats.forwards >= max(o.stats.forwards for o in outs.values())


def test_cancel_ends_one_sequence_only(llm):
    eng = llm.engine("llada")
    a, b = eng.add(PROMPT), eng.add(PROMPT)
    eng.step()
    prefix_before = eng.committed_prefix(a)
    eng.cancel(a)
    outs = {}
    while not eng.idle:
        eng.step()
    for o in eng.finished():
        outs[o.id] = o
    assert outs[a].finish_reason == "cancelled" and outs[b].finish_reason in ("stop", "length")
    assert outs[a].slots[: len(prefix_before)].tolist() == prefix_before.tolist()
    eng.cancel(12345)  # unknown ids are ignored
    with pytest.raises(dlm.InvalidParameter):
        eng.committed_prefix(a)  # taken: forgotten


def test_the_canvas_and_committed_prefix_only_grow(llm):
    eng = llm.engine("cdlm")
    seq = eng.add(PROMPT)
    last = 0
    while not eng.idle:
        reports = eng.step()
        if eng.idle:
            break
        prefix = eng.committed_prefix(seq)
        assert len(prefix) >= last
        last = len(prefix)
        canvas = eng.canvas(seq)
        assert all(int(canvas[p]) != llm.model.mask_id for r in reports for p in r.committed)


def test_forward_returns_the_models_logits_as_a_numpy_array_without_a_copy(llm):
    tokens = llm.encode(PROMPT)
    logits = llm.forward(tokens)
    assert logits.dtype == np.float32 and logits.shape == (len(tokens), llm.model.vocab_size)
    assert logits.flags.c_contiguous and not logits.flags.owndata  # numpy wraps the buffer the model wrote
    assert np.isfinite(logits).all()
    causal = llm.forward(tokens, mask="causal")
    assert np.allclose(causal[-1], llm.forward(tokens, mask="causal")[-1])
    assert not np.allclose(causal[0], logits[0]), "the mask reaches the attention"
    # a causal row depends only on its prefix
    assert np.array_equal(llm.forward(tokens[:3], mask="causal")[2], causal[2])


def test_the_gil_is_released_during_steps(llm):
    """Another Python thread runs throughout a step: had the step held the GIL, that thread would
    stall for the whole step (the longest gap between its ticks would span the step)."""
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.0005)

    eng = llm.engine("llada")
    eng.add_batch([PROMPT] * 16)  # one step: a batched forward of 16 canvases, tens of milliseconds at least
    intervals = []
    t = threading.Thread(target=tick)
    t.start()
    try:
        while not eng.idle and len(intervals) < 8:
            a = time.perf_counter()
            eng.step()
            intervals.append((a, time.perf_counter()))
    finally:
        done.set()
        t.join()
    a, b = max(intervals, key=lambda ab: ab[1] - ab[0])
    assert b - a > 0.02, "the step is long enough to tell"
    inside = [a] + [x for x in ticks if a < x < b] + [b]
    longest_gap = max(y - x for x, y in zip(inside, inside[1:]))
    assert longest_gap < (b - a) / 3, f"the other thread stalled {longest_gap:.3f} s of a {b - a:.3f} s step"
