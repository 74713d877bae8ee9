"""dlm: decoding diffusion language models (LLaDA, Dream, CDLM, CD4LM, Fast-dLLM, ...) from Python.

    import dlm
    llm = dlm.LLM()                                  # a model folder or .gguf; default: the shipped CDLM student
    print(llm.generate("What is 3 + 4?")[0].text)

docs/python.md is the tour: presets and their options, streaming, the step-wise engine, forwards as
numpy arrays, schedules written in Python, and lm-evaluation-harness.
"""

from typing import Dict, List, Tuple

from . import _dlm
from ._dlm import EngineStats, Model, Result, ScheduleStep, Settings, StepReport, TextStream
from .errors import ContractError, Error, FileError, InvalidParameter, NumericError, OutOfMemory, TensorError
from .llm import LLM, Delta, Engine, Output, Schedule, Stats, default_model_path

__version__ = "0.1.0"


def presets() -> list:
    """(name, description) of every preset of dlm's registry."""
    return _dlm.presets()


def policies() -> Dict[str, List[Tuple[str, str]]]:
    """{axis: [(name, description), ...]} for "mask", "cache", "schedule" and "sampler": the policy
    name table of the library (dlm/registry/policy_names.hpp), what generate(mask=..., cache=...,
    schedule=..., sampler=...) composes."""
    return {axis: rows for axis, rows in _dlm.policies()}


__all__ = ["LLM", "Engine", "Output", "Delta", "Stats", "Schedule", "Model", "Result", "ScheduleStep", "Settings", "StepReport",
           "EngineStats", "TextStream", "presets", "policies", "default_model_path", "Error", "InvalidParameter", "FileError", "TensorError",
           "NumericError", "OutOfMemory", "ContractError"]
