"""Tensor values during lowering: an affine *load* function from output indices to expression text.

A value is either stored in an array of the program (``array`` is set, ``load`` reads it), a view of
another value (a composed index map, no computation) or an elementwise expression that is computed where
it is read (``ops`` counts its operations).  Shapes are affine texts in the program's parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import UnsupportedError

#: torch dtypes polytri has, by polytri name.
PT_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "float32", torch.float64: "float64", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.int8: "int8", torch.uint8: "uint8", torch.int32: "int32", torch.int64: "int64", torch.bool: "bool",
}

Index = tuple[str, ...]
Load = Callable[[Index], str]


class LoweringError(UnsupportedError):
    """A node (or one of its arguments) that polytri does not lower: the node runs in eager instead."""


@dataclass(frozen=True)
class Val:
    """A tensor value inside one program."""

    shape: tuple[str, ...]
    """Affine text of each dimension's extent (``()`` for a 0-d tensor)."""
    dtype: torch.dtype
    """Element type."""
    load: Load
    """Expression text of the element at the given index texts."""
    array: str | None = None
    """The program array that stores the value, if it is stored."""
    ops: int = 0
    """Operations of the expression (0: a read of an array, possibly through a view)."""
    wide: Load | None = None
    """For a 16-bit value computed by an op of this program: the expression before its rounding, in
    float32, which the next op of a chain may read instead (the ``float32_chains`` option)."""

    @property
    def rank(self) -> int:
        return len(self.shape)


def pt_dtype(dtype: torch.dtype) -> str:
    """polytri's name of a torch dtype; :class:`LoweringError` for the ones it lacks."""
    name = PT_DTYPES.get(dtype)
    if name is None:
        raise LoweringError(f"dtype {dtype} is not supported by polytri")
    return name


def cast(text: str, src: torch.dtype, dst: torch.dtype) -> str:
    """``text`` (of dtype ``src``) converted to ``dst``."""
    if src == dst:
        return text
    if dst == torch.bool:
        return f"({text} != 0)"
    return f"{pt_dtype(dst)}({text})"


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype an op on ``dtype`` values accumulates and computes its intermediates in: ``float32`` for
    ``float16`` and ``bfloat16`` (ATen's *opmath* type: eager sums, normalizes and multiplies-accumulates
    16-bit floats in float32 and rounds once, at the op's output), ``dtype`` itself otherwise.

    The IR keeps its literal semantics (an operation on 16-bit floats rounds after each operation): it is
    the lowering that declares float32 temporaries and casts to this type, and rounds the op's result
    with :func:`rounded`."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def rounded(v: Val, dtype: torch.dtype) -> Val:
    """``v`` (computed in :func:`acc_dtype`) converted to the op's output ``dtype`` where it is read: the one
    rounding of an op on 16-bit floats.  ``v`` itself when the types agree."""
    if v.dtype == dtype:
        return v
    return Val(v.shape, dtype, lambda idx: cast(v.load(idx), v.dtype, dtype), ops=v.ops + 1)


def literal(value: Any) -> str:
    """A Python number as expression text (weakly typed, as in PyTorch)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return f"({value})" if value < 0 else str(value)
    if isinstance(value, float):
        if math.isinf(value):  # no literal for infinity: an overflowing product (IEEE: inf everywhere)
            return "(1e308 * 10.0)" if value > 0 else "(-(1e308 * 10.0))"
        if math.isnan(value):
            raise LoweringError("a NaN constant runs in eager")
        text = repr(value)
        return f"({text})" if value < 0 or text.startswith("-") else text
    raise LoweringError(f"unsupported constant {value!r} of type {type(value).__name__}")


def array_val(name: str, shape: Sequence[str], dtype: torch.dtype) -> Val:
    """A value stored in array ``name`` (0-d values live in arrays of shape ``(1,)``)."""
    def load(idx: Index) -> str:
        return f"{name}[{', '.join(idx) if idx else '0'}]"
    return Val(tuple(shape), dtype, load, array=name)


def broadcast(v: Val, out_shape: Sequence[str]) -> Load:
    """Load of ``v`` broadcast to ``out_shape`` (size-1 dimensions read index 0)."""
    r = len(out_shape) - v.rank
    if r < 0:
        raise LoweringError(f"cannot broadcast shape {v.shape} to {tuple(out_shape)}")
    ones = [v.shape[k] == "1" and out_shape[r + k] != "1" for k in range(v.rank)]

    def load(idx: Index) -> str:
        return v.load(tuple("0" if ones[k] else idx[r + k] for k in range(v.rank)))
    return load


def view_of(v: Val, shape: Sequence[str], index_map: Callable[[Index], Index]) -> Val:
    """A view of ``v``: element ``idx`` of the view is element ``index_map(idx)`` of ``v``."""
    wide = v.wide
    return Val(tuple(shape), v.dtype, lambda idx: v.load(index_map(idx)), ops=v.ops,
               wide=None if wide is None else lambda idx: wide(index_map(idx)))


def const_val(value: Any, shape: Sequence[str], dtype: torch.dtype) -> Val:
    """A tensor filled with one constant."""
    text = literal(bool(value)) if dtype == torch.bool else cast(literal(value), _literal_dtype(value), dtype)
    return Val(tuple(shape), dtype, lambda idx: text, ops=1)


def _literal_dtype(value: Any) -> torch.dtype:
    if isinstance(value, bool):
        return torch.bool
    return torch.int64 if isinstance(value, int) else torch.float64
