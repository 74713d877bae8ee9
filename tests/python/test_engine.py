"""The step-wise engine (add, step, cancel, finished) and the model's forward as numpy."""

import os
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
    eng.add_batch([PROMPT] * 64)  # one step: a batched forward of 64 canvases, tens of milliseconds even on a fast machine
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


def test_sequences_with_their_own_settings_in_one_batch_each_decode_as_alone(llm):
    q2 = "Tom has 3 apples. He buys 4 more. How many apples does he have now?"
    eng = llm.engine("llada", steps=48)
    a = eng.add(PROMPT, temperature=0.9, seed=4, block_length=16)   # its own sampler and mask
    b = eng.add(q2, steps=24, gen_length=24, block_length=8)         # its own schedule and length
    c = eng.add(PROMPT, seed=4)                                       # the engine's settings
    outs = {}
    while not eng.idle:
        eng.step()
        outs.update((o.id, o) for o in eng.finished())
    alone_a = llm.generate(PROMPT, "llada", steps=48, temperature=0.9, seed=4, block_length=16)[0]
    alone_b = llm.generate(q2, "llada", steps=24, gen_length=24, block_length=8)[0]
    alone_c = llm.generate(PROMPT, "llada", steps=48, seed=4)[0]
    for seq, alone in ((a, alone_a), (b, alone_b), (c, alone_c)):
        assert outs[seq].slots.tolist() == alone.slots.tolist()
        assert outs[seq].commit_forward.tolist() == alone.commit_forward.tolist()
    # Each had its own: a its blocks of 16, b its 24 slots in 3 blocks, c the engine's blocks of 8.
    assert [outs[s].stats.steps_per_block for s in (a, b, c)] == [[16] * 3, [8] * 3, [8] * 6]


def test_a_composed_engine_takes_per_sequence_settings_and_refuses_what_its_policies_lack(llm):
    eng = llm.engine(mask="block_causal", cache="prefix", schedule="threshold", sampler="categorical")
    a = eng.add(PROMPT, threshold=0.5, temperature=5.0, seed=2)  # hot enough to change this confident model's answer
    b = eng.add(PROMPT)
    outs = {}
    while not eng.idle:
        eng.step()
        outs.update((o.id, o) for o in eng.finished())
    names = dict(mask="block_causal", cache="prefix", schedule="threshold", sampler="categorical")
    assert outs[a].slots.tolist() == llm.generate(PROMPT, **names, threshold=0.5, temperature=5.0, seed=2)[0].slots.tolist()
    assert outs[b].slots.tolist() == llm.generate(PROMPT, **names)[0].slots.tolist()
    assert outs[a].slots.tolist() != outs[b].slots.tolist()
    with pytest.raises(dlm.InvalidParameter) as e:
        eng.add(PROMPT, steps=4)
    assert e.value.parameter == "steps"
    with pytest.raises(dlm.InvalidParameter) as e:
        llm.engine("cdlm").add(PROMPT, block_length=5)
    assert e.value.parameter == "block_length"


def test_a_sequence_with_its_own_settings_keeps_the_engines_python_schedule(llm):
    calls = {"n": 0}

    def top_one(step):
        calls["n"] += 1
        return [int(np.argmax(step.probability))]

    eng = llm.engine("llada", schedule=top_one)
    a = eng.add(PROMPT, block_length=16, temperature=0.8, seed=5)  # its own mask and sampler, the engine's schedule
    outs = {}
    while not eng.idle:
        eng.step()
        outs.update((o.id, o) for o in eng.finished())
    in_engine = calls["n"]
    alone = llm.generate(PROMPT, "llada", schedule=top_one, block_length=16, temperature=0.8, seed=5)[0]
    assert in_engine > 0 and calls["n"] == 2 * in_engine  # the callable decided every step of both
    assert outs[a].slots.tolist() == alone.slots.tolist()
    assert outs[a].commit_forward.tolist() == alone.commit_forward.tolist()
    assert outs[a].stats.steps_per_block == alone.stats.steps_per_block


def test_an_editing_presets_reports_name_the_slots_each_step_replaced(models):
    teacher = dlm.LLM(models / "teacher")  # less sure of its drafts than the students: it edits them
    eng = teacher.engine("cdlm-edit")
    seq = eng.add("There are 8 cups with 5 marbles in each. How many marbles are there now?", seed=1)
    edits = 0
    while not eng.idle:
        before = eng.canvas(seq).copy()
        reports = eng.step()
        if eng.idle or not any(r.id == seq and not r.finished for r in reports):
            break
        after = eng.canvas(seq)
        for r in reports:
            for p in r.edited:  # a filled slot given another token
                assert int(before[p]) != teacher.model.mask_id and int(after[p]) != int(before[p])
                edits += 1
            for p in r.committed:
                assert int(before[p]) == teacher.model.mask_id and int(after[p]) != teacher.model.mask_id
    assert edits > 0, "the teacher's drafts get edited under cdlm-edit, so the reports are checked"


THREADS_SCRIPT = r"""
import os, sys, threading
import dlm
def tasks():
    return len(os.listdir("/proc/self/task"))
def started(llm):  # the OpenMP threads a decode in a new Python thread starts (they live as long as that thread)
    out = []
    def run():
        llm.generate("What is 3 + 4?")
        out.append(tasks() - before - 1)
    t = threading.Thread(target=run)
    t.start(); t.join()
    return out[0]
llm = dlm.LLM(sys.argv[1], threads=1)
default = dlm.LLM(sys.argv[1])
before = tasks()
print(started(llm), started(default), llm.threads, dlm._dlm.default_threads)
"""


def test_an_llms_threads_hold_in_every_python_thread_that_calls_it(models):
    """OpenMP's thread count is per calling thread: LLM(threads=1) decoding in another Python thread starts no
    OpenMP threads, while an LLM with the process's default (OMP_NUM_THREADS=3 here) starts its team of 3."""
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "3"}
    p = subprocess.run([sys.executable, "-c", THREADS_SCRIPT, str(models / "cdlm")], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    one, default, threads, process = p.stdout.split()
    assert (int(one), int(threads), int(process)) == (0, 1, 3), p.stdout
    assert int(default) == 2, p.stdout  # the default LLM's team of 3: two threads beside the calling one


CUPS = "There are 8 cups with 5 marbles in each. How many marbles are there now?"
APPLES = "Tom has 3 apples. He buys 4 more. How many apples does he have now?"
LIST = [CUPS, APPLES, CUPS, APPLES, CUPS]
SAMPLED = dict(gen_length=16, block_length=8, steps=16, temperature=4.0, seed=5)  # hot enough that repeats differ


def test_generate_runs_at_most_max_batch_sequences_and_answers_as_one_batch(models, monkeypatch):
    """A list longer than max_batch decodes a few at a time, the next prompt joining as one finishes, each
    seeded as in one batch: the answers (sampled, with a repeated prompt) are those of add_batch's one batch."""
    llm = dlm.LLM(models / "cdlm", max_batch=2)
    eng = llm.engine("llada", **SAMPLED)
    ids = eng.add_batch(LIST, seed=SAMPLED["seed"])
    whole = {}
    while not eng.idle:
        eng.step()
        whole.update((o.id, o) for o in eng.finished())
    running = []
    step = dlm.llm.Engine.step
    monkeypatch.setattr(dlm.llm.Engine, "step", lambda self: (running.append(self.active), step(self))[1])
    outs = llm.generate(LIST, "llada", **SAMPLED)
    assert [o.slots.tolist() for o in outs] == [whole[i].slots.tolist() for i in ids]
    assert outs[0].slots.tolist() != outs[4].slots.tolist()  # a repeated prompt draws its own samples
    assert max(running) == 2 and len(running) > max(o.stats.forwards for o in outs)
    streamed = [""] * len(LIST)
    for d in llm.stream(LIST, "llada", **SAMPLED):
        streamed[d.index] += d.text
    assert streamed == [o.text for o in outs]


def test_generate_checks_every_prompt_before_any_decodes(models, monkeypatch):
    """The bad prompt is the sixth, past max_batch: without the whole list checked first, the first two would
    start decoding (and the patched step would raise) before it was ever added."""
    llm = dlm.LLM(models / "cdlm", max_batch=2)

    def step(self):
        raise AssertionError("a forward ran before every prompt was checked")
    monkeypatch.setattr(dlm.llm.Engine, "step", step)
    with pytest.raises(dlm.InvalidParameter, match=r"prompts\[5\].*empty"):
        llm.generate(LIST + [""], "cdlm")
    with pytest.raises(dlm.InvalidParameter, match=r"prompts\[5\].*empty"):
        next(llm.stream(LIST + [""], "cdlm"))


def test_check_batch_refuses_what_add_batch_refuses_and_queues_nothing(llm):
    eng = llm.engine("cdlm")
    with pytest.raises(dlm.InvalidParameter, match=r"prompts\[1\]"):
        eng._engine.check_batch([[5, 6], []])
    eng._engine.check_batch([[5, 6], [7]])
    eng._engine.check_batch([[5, 6], [7]], at_once=2)  # weighed together: far below any machine's memory
    with pytest.raises(dlm.InvalidParameter, match="at_once"):
        eng._engine.check_batch([[5, 6], [7]], at_once=0)
    assert eng.idle and eng.active == 0


@pytest.mark.parametrize("value", [0, -1, 4097, 2.5, "8", True])
def test_max_batch_outside_its_range_is_refused_by_name(models, llm, value):
    with pytest.raises(dlm.InvalidParameter, match="max_batch"):
        dlm.LLM(models / "cdlm", max_batch=value)
    with pytest.raises(dlm.InvalidParameter, match="max_batch"):
        llm.max_batch = value  # checked wherever it is set
    assert llm.max_batch == 16
