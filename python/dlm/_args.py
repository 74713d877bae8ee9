"""Checks of the arguments a caller passes, before they reach the compiled module: a wrong type, or a
value outside what dlm accepts, raises dlm.InvalidParameter naming the argument as Python spells it
(nanobind would raise a TypeError listing the whole signature, or take True for 1). The numeric
options' bounds are dlm-generate's (cli/bounds.hpp, read through _dlm.option_bounds()), so the
package and the command line refuse the same values.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from . import _dlm
from .errors import InvalidParameter

#: {option: (lo, hi, open_lo, open_hi, integer)} of the numeric options.
BOUNDS = {name: tuple(rest) for name, *rest in _dlm.option_bounds()}


def refuse(name: str, rule: str, value: Any = None, *, show: bool = True) -> None:
    """Raises InvalidParameter naming `name`, with the value it got."""
    got = f", got {value!r}" if show else ""
    raise InvalidParameter(f"invalid parameter '{name}': {rule}{got}", name, rule)


def is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value: Any) -> bool:
    return is_integer(value) or (isinstance(value, (float, np.floating)))


def _number(x: float) -> str:
    return "inf" if x == math.inf else str(int(x)) if x == int(x) else f"{x:g}"


# The options the engine holds as 32-bit floats (registry::settings): checked as they will be held.
FLOAT32 = ("temperature", "top_p")


def option(name: str, value: Any) -> Any:
    """A decoding option's value, checked: its type, and for a numeric one its bounds."""
    if name == "seed":
        return seed(value)
    if name == "algorithm":
        if not isinstance(value, str):
            refuse(name, "must be a name (origin, maskgit_plus, topk_margin, entropy, random)", value)
        return value
    lo, hi, open_lo, open_hi, integer = BOUNDS[name]
    span = ("(" if open_lo else "[") + _number(lo) + ", " + _number(hi) + (")" if open_hi else "]")
    if integer:
        if not is_integer(value):
            refuse(name, f"must be an integer in {span}", value)
    elif not is_real(value) or not math.isfinite(value):
        refuse(name, f"must be a finite number in {span}", value)
    def inside(x: float) -> bool:
        return (x > lo if open_lo else x >= lo) and (x < hi if open_hi else x <= hi)

    if not inside(value):
        refuse(name, f"must be in {span}", value)
    if name in FLOAT32 and not inside(float(np.float32(value))):  # top_p=1e-50 is 0 as the sampler's float
        refuse(name, f"is {value!r}, which the sampler's float holds as {float(np.float32(value))!r}, outside {span} "
                     "(use a value a float can tell from its bound)", show=False)
    return int(value) if integer else float(value)


def seed(value: Optional[int]) -> Optional[int]:
    """None or an integer in [0, 2^64) (the engine's seeds are 64-bit unsigned)."""
    if value is None:
        return None
    if not is_integer(value) or not 0 <= int(value) < 1 << 64:
        refuse("seed", "must be an integer in [0, 2^64)", value)
    return int(value)


def threads(value: int) -> int:
    if not is_integer(value) or not 1 <= value <= _dlm.max_threads:
        refuse("threads", f"must be an integer in [1, {_dlm.max_threads}] (or None: the process's)", value)
    return int(value)


def max_batch(value: Any) -> int:
    """Sequences decoded at once by generate() and stream(): an integer in [1, 4096]."""
    if not is_integer(value) or not 1 <= value <= 4096:
        refuse("max_batch", "must be an integer in [1, 4096] (sequences decoded at once; more prompts wait their turn)", value)
    return int(value)


def cfg(value: Any) -> float:
    """The guidance scale's type (its range is the engine's check, named cfg by llm._as_cfg)."""
    if not is_real(value):
        refuse("cfg", "must be a number >= 0 (0: no guidance)", value)
    return float(value)


def choice(name: str, value: Any, allowed: Sequence[str], none_means: str) -> str:
    """A type named by a string (dtype, kv): one of `allowed`, or None (""; what None means is said)."""
    if value is None:
        return ""
    if not isinstance(value, str) or value not in allowed:
        listed = ", ".join(f"'{a}'" for a in allowed)
        refuse(name, f"must be one of {listed}, or None ({none_means})", value)
    return value


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        refuse(name, "must be True or False", value)
    return bool(value)


def think(value: Any) -> Optional[bool]:
    """A chat template's enable_thinking: None (not passed to the template), True or False."""
    return None if value is None else flag("think", value)


def not_a_prompt_list(name: str, value: Any, rule: str) -> None:
    """Refuses, naming `name`, what iterates but is no list of prompts: bytes (their iteration is byte
    values, which would pass for token ids; text is str), mappings and sets (no order), or no iterable."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        refuse(name, rule + "; bytes are neither text (decode them to str) nor token ids", value)
    if isinstance(value, (dict, set, frozenset)) or not hasattr(value, "__iter__"):
        refuse(name, rule, value)


def tokens(name: str, ids: Any, vocab: int) -> list:
    """Token ids, checked: a sequence of integers in [0, vocab) (the model's vocabulary)."""
    if isinstance(ids, (str, bytes, bytearray, memoryview, dict, set, frozenset)) or not hasattr(ids, "__iter__"):
        refuse(name, "must be a sequence of token ids (int)", ids)
    out = []
    for j, t in enumerate(ids):
        if not is_integer(t):
            refuse(name, f"token {j} is {t!r}, not a token id (int)", show=False)
        if not 0 <= t < vocab:
            refuse(name, f"token {j} is {int(t)}, outside the vocabulary [0, {vocab})", show=False)
        out.append(int(t))
    return out


#: The roles a message may have: the templates dlm writes know these (docs/models.md, "Chat templates").
ROLES = ("system", "developer", "user", "assistant", "tool")


def text(name: str, value: Any) -> str:
    """A text, checked: a str that UTF-8 can carry (a lone surrogate, '\\ud800', cannot: refused by name
    rather than reaching the library as an argument it does not take)."""
    if not isinstance(value, str):
        refuse(name, "must be a str", value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        refuse(name, f"holds a lone surrogate (U+{ord(value[e.start]):04X} at {e.start}), which is no text UTF-8 can carry", show=False)
    return value


def messages(name: str, value: Any) -> list:
    """A conversation, checked: a non-empty list of {"role", "content"} dicts (and "name", which no
    template dlm writes reads) with str values, role one of ROLES; as (role, content) pairs. Another key
    (reasoning_content, tool_calls, ...) is refused by name rather than left out of the prompt."""
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        refuse(name, 'must be a list of messages {"role": ..., "content": ...}', value)
    out = []
    for i, m in enumerate(value):
        field = f"{name}[{i}]"
        if not isinstance(m, dict):
            refuse(field, 'must be a dict {"role": ..., "content": ...}', m)
        for key in m:
            if key not in ("role", "content", "name"):
                refuse(f"{field}.{key}", "is not read by dlm's chat templates (a message holds role, content and name)", show=False)
        for key in ("role", "content"):
            if key not in m:
                refuse(f"{field}.{key}", "is required", show=False)
            text(f"{field}.{key}", m[key])
        if m["role"] not in ROLES:
            refuse(f"{field}.role", "must be one of " + ", ".join(ROLES), m["role"])
        out.append((m["role"], m["content"]))
    if not out:
        refuse(name, "holds no message", show=False)
    return out
