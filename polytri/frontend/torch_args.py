"""Typed access to the arguments of ATen nodes.

``fx.Node.args`` and ``kwargs`` hold :data:`torch.fx.node.Argument` values: one union of everything a
graph can carry (nodes, numbers, lists, dtypes, devices, slices...).  An overload's schema fixes which of
them a position holds; the handlers read their arguments through these functions, which narrow an
argument to that type.

:func:`as_int` and :func:`as_float` are ``int()`` and ``float()`` of a number argument: anything else
(a node, for a size known only at run time) raises the ``TypeError`` the builtin raises for it, and the
node runs in eager with that reason.  The others raise :class:`.LoweringError` for an argument that their
schema rules out.
"""

from __future__ import annotations

from typing import SupportsFloat, SupportsInt

import torch
import torch.fx as fx
from torch.fx.node import Argument

from .torch_values import LoweringError

__all__ = ["Argument", "Number", "as_float", "as_int", "as_ints", "as_list", "as_number", "fake", "node_arg"]

Number = int | float
"""A Python number argument (``bool`` is an ``int``)."""


def as_int(x: Argument) -> int:
    """``int(x)`` of a number argument."""
    if isinstance(x, SupportsInt):
        return int(x)
    raise TypeError(f"int() argument must be a string, a bytes-like object or a real number, not "
                    f"'{type(x).__name__}'")


def as_float(x: Argument) -> float:
    """``float(x)`` of a number argument."""
    if isinstance(x, SupportsFloat):
        return float(x)
    raise TypeError(f"float() argument must be a string or a real number, not '{type(x).__name__}'")


def as_number(x: Argument) -> Number:
    """A Python number argument (a ``Scalar`` of the schema), as it is."""
    if isinstance(x, (int, float)):
        return x
    raise LoweringError(f"unsupported constant {x!r} of type {type(x).__name__}")


def as_list(x: Argument) -> list[Argument]:
    """A list argument (``int[]``, ``SymInt[]``, ``Tensor[]``...) as a list of its items."""
    if isinstance(x, (list, tuple)):
        return list(x)
    raise LoweringError(f"expected a list argument, got {x!r}")


def as_ints(x: Argument) -> list[int]:
    """A list of ints (``int[]``), its items as they are."""
    items = as_list(x)
    ints = [v for v in items if isinstance(v, int)]
    if len(ints) != len(items):
        raise LoweringError(f"expected a list of ints, got {x!r}")
    return ints


def node_arg(x: Argument) -> fx.Node:
    """A tensor argument: the node that computes it."""
    if isinstance(x, fx.Node):
        return x
    raise LoweringError(f"expected a tensor argument, got {x!r}")


def fake(x: Argument) -> torch.Tensor:
    """The example value (a fake tensor) of a tensor argument."""
    return node_arg(x).meta["val"]
