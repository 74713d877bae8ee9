"""Many calls do not leak: the process's resident memory stays bounded over hundreds of decodes,
streams, engines, Python schedules, forwards and raised errors."""

import gc

import numpy as np
import pytest

import dlm


ROUNDS = 100


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    pytest.skip("no /proc/self/status to read the resident memory from")


def one_round(llm, i):
    llm.generate(["What is 3 + 4?", [5, 6, 7]], "cdlm", seed=i)
    for _ in llm.stream("What is 2 + 2?", "cdlm", canvases=True):
        pass
    llm.generate("What is 3 + 4?", "cdlm", gen_length=16, schedule=lambda s: [int(np.argmax(s.probability))])
    llm.forward(list(range(100)))  # 100 x vocab logits: 275 KiB a call
    try:
        llm.generate("hi", "cdlm", steps=3)
    except dlm.InvalidParameter:
        pass
    try:
        llm.generate("hi", "cdlm", schedule=lambda s: 1 / 0)
    except ZeroDivisionError:
        pass


def test_resident_memory_stays_bounded_over_many_calls(llm):
    for i in range(20):  # warm up: allocator pools, numpy, caches
        one_round(llm, i)
    gc.collect()
    before = rss_kib()
    for i in range(ROUNDS):
        one_round(llm, i)
    gc.collect()
    grown = rss_kib() - before
    # One round allocates several MiB (engines, K/V caches, logits); a leak of even one engine or
    # logits buffer (275 KiB) per round would pass this bound within 15 rounds.
    assert grown < 4096, f"resident memory grew by {grown} KiB over {ROUNDS} rounds"


class _Experiment:
    """An object holding an engine whose Python schedule is one of its own methods: a reference cycle
    (experiment -> engine -> schedule -> experiment) that only Python's cycle collector can free."""

    def __init__(self, llm):
        self.eng = llm.engine("cdlm", gen_length=16, schedule=self.schedule)

    def schedule(self, step):
        return [int(np.argmax(step.probability))]


def test_a_schedule_that_refers_back_to_the_object_holding_its_engine_is_collected(llm):
    import weakref

    exp = _Experiment(llm)
    exp.eng.add("What is 3 + 4?")
    exp.eng.step()
    alive = weakref.ref(exp)
    del exp
    gc.collect()
    assert alive() is None, "the cycle through the engine's Python schedule was not collected"
    assert not any(type(o).__name__ == "_Experiment" for o in gc.get_objects())
    for _ in range(300):  # warm up: allocator pools
        _Experiment(llm).eng.add("What is 3 + 4?")
    gc.collect()
    before = rss_kib()
    for _ in range(300):  # each engine and its K/V: about 350 KiB a round when the cycles leaked
        _Experiment(llm).eng.add("What is 3 + 4?")
    gc.collect()
    grown = rss_kib() - before
    assert grown < 16384, f"resident memory grew by {grown} KiB over 300 engines in cycles"
