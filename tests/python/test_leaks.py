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
