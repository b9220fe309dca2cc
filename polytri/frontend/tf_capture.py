"""Capturing a TensorFlow function: its concrete function (a graph) for one call signature.

A call's arguments are flattened with ``tf.nest``: the leaves that are tensors (TensorFlow tensors, numpy
arrays and scalars) are the graph's inputs, the other leaves (Python numbers, strings...) are compile-time
constants, part of the signature by value, as ``tf.function`` treats them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError, MissingExtraError, UnsupportedError

log = logging.getLogger("polytri.tf")


def require_tf() -> ModuleType:
    """The ``tensorflow`` module; :class:`MissingExtraError` naming the extra when it is not installed."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up notes, unless asked for
    try:
        import tensorflow
    except ImportError as exc:
        raise MissingExtraError("polytri.tf needs TensorFlow, which is not installed: pip install "
                                f"polytri[tensorflow] (importing tensorflow failed: {exc})") from None
    return tensorflow


@dataclass(frozen=True)
class CallSplit:
    """One call's arguments: the tensor leaves (as TensorFlow tensors), the nest and the signature."""

    tensors: list[Any]
    """The tensor leaves, in ``tf.nest`` order, converted to TensorFlow tensors."""
    flat: list[Any]
    """Every leaf of ``(args, kwargs)``: ``None`` where a tensor goes, the value itself otherwise."""
    nest: Any
    """``(list(args), kwargs)``: the structure the leaves are packed back into."""
    key: Hashable
    """What a compiled graph is cached under: the structure, each tensor's shape and dtype, the other
    leaves' values."""


def _is_tensor(tf: ModuleType, x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic)) or bool(tf.is_tensor(x))


def split_call(args: tuple[Any, ...], kwargs: dict[str, Any], input_signature: Sequence[Any] | None) -> CallSplit:
    """Split a call into tensor leaves and constants (checked against ``input_signature`` if given)."""
    tf = require_tf()
    nest = (list(args), dict(kwargs))
    if input_signature is not None:
        return _signed(tf, nest, input_signature)
    flat = tf.nest.flatten(nest)
    tensors: list[Any] = []
    where: list[Any] = []
    keys: list[Hashable] = []
    for x in flat:
        if _is_tensor(tf, x):
            t = tf.convert_to_tensor(x)
            tensors.append(t)
            where.append(None)
            keys.append(("T", tuple(t.shape), t.dtype.name))
        else:
            try:
                hash(x)
            except TypeError:
                raise UnsupportedError(f"argument leaf of type {type(x).__name__} is neither a tensor nor hashable "
                                       "(Python values are compile-time constants, compared by value)") from None
            where.append(x)
            keys.append(("V", type(x).__name__, x))
    skeleton = repr(tf.nest.map_structure(lambda _: 0, nest))
    return CallSplit(tensors, where, nest, (skeleton, tuple(keys)))


def _signed(tf: ModuleType, nest: tuple[list[Any], dict[str, Any]], signature: Sequence[Any]) -> CallSplit:
    """The call checked against ``input_signature``: every argument a tensor of its spec."""
    args, kwargs = nest
    if kwargs:
        raise ArgumentError("keyword arguments are not taken with an input_signature: pass them by position")
    try:
        tf.nest.assert_same_structure(list(signature), args, expand_composites=False)
    except (ValueError, TypeError) as exc:
        raise ArgumentError(f"the arguments do not match the input_signature: {exc}") from None
    tensors = []
    for spec, x in zip(tf.nest.flatten(list(signature)), tf.nest.flatten(args)):
        t = tf.convert_to_tensor(x, dtype=spec.dtype)
        if not spec.is_compatible_with(t):
            raise ArgumentError(f"argument of shape {tuple(t.shape)} and dtype {t.dtype.name} does not match "
                                f"{spec} of the input_signature")
        tensors.append(t)
    keys = tuple(("T", tuple(t.shape), t.dtype.name) for t in tensors)
    return CallSplit(tensors, [None] * len(tensors), nest, (repr(list(signature)), keys))


@dataclass(frozen=True)
class Captured:
    """A call signature's concrete function: its inputs are the call's tensor leaves, in order (then the
    values it captured), its outputs the flattened result."""

    concrete: Any
    structure: Any
    """The result's structure (its leaves are graph tensors: only the structure is used)."""


def capture(fn: Callable[..., Any], split: CallSplit) -> Captured:
    """The concrete function of ``fn`` for this call."""
    tf = require_tf()
    holder: dict[str, Any] = {}

    def flat(*tensors: Any) -> list[Any]:
        it = iter(tensors)
        leaves = [next(it) if v is None else v for v in split.flat]
        args, kwargs = tf.nest.pack_sequence_as(split.nest, leaves)
        out = fn(*args, **kwargs)
        holder["structure"] = out
        return [tf.convert_to_tensor(o) for o in tf.nest.flatten(out)]
    specs = [tf.TensorSpec(t.shape, t.dtype) for t in split.tensors]
    concrete = tf.function(flat).get_concrete_function(*specs)
    return Captured(concrete, holder["structure"])


def pack(captured: Captured, outputs: Sequence[Any]) -> Any:
    """The flat outputs in the structure of the function's result."""
    tf = require_tf()
    return tf.nest.pack_sequence_as(captured.structure, list(outputs))
