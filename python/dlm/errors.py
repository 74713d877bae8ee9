"""dlm's errors as Python exceptions (the C++ classes of include/dlm/core/error.hpp, translated by the
compiled module): each carries what the C++ error names, so a caller can tell which input is wrong.

    try:
        llm.generate("hi", "cdlm", block_length=7)
    except dlm.InvalidParameter as e:
        print(e.parameter, e.rule)   # block_length  must divide ...
"""

from __future__ import annotations


class Error(RuntimeError):
    """Base of every error dlm raises on purpose."""


class InvalidParameter(Error, ValueError):
    """A decoding option, a policy option or a prompt breaks a rule; nothing ran on the model."""

    def __init__(self, message: str, parameter: str = "", rule: str = "") -> None:
        super().__init__(message)
        self.parameter = parameter  #: the option as dlm names it ("block_length", "threshold", "preset", ...)
        self.rule = rule  #: the rule it breaks


class FileError(Error, OSError):
    """A file could not be read, or its content is malformed."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path  #: the file (or folder)

    def __str__(self) -> str:  # OSError's own __str__ would format errno fields
        return str(self.args[0]) if self.args else ""


class TensorError(FileError):
    """A tensor in a checkpoint is missing, unexpected, or has the wrong dtype, shape or extent."""

    def __init__(self, message: str, path: str = "", tensor: str = "") -> None:
        super().__init__(message, path)
        self.tensor = tensor  #: the tensor's name in the checkpoint


class NumericError(Error, ArithmeticError):
    """The model produced a non-finite logit: at which sequence, forward and canvas row."""

    def __init__(self, message: str, sequence: int = 0, forward: int = 0, row: int = 0) -> None:
        super().__init__(message)
        self.sequence = sequence
        self.forward = forward
        self.row = row


class OutOfMemory(Error, MemoryError):
    """A model or buffer needs more memory than the machine has available."""

    def __init__(self, message: str, needed: int = 0, available: int = 0) -> None:
        super().__init__(message)
        self.needed = needed  #: bytes
        self.available = available  #: bytes


class ContractError(Error):
    """A policy (a Python schedule too) or the model broke the decoder's contract."""


__all__ = ["Error", "InvalidParameter", "FileError", "TensorError", "NumericError", "OutOfMemory", "ContractError"]
