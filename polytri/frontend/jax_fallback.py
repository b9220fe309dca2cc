"""A JAX primitive run through JAX itself, as one node of an ATen graph (the planner leaves it to eager).

The node's target is a :class:`PrimitiveCall`: it turns its torch operands into JAX arrays, binds the
primitive with the equation's parameters and turns the results back.  Its ``__name__`` is the
primitive's, which is what ``explain`` lists among the fallback ops.  The node's first argument is a
token naming the primitive and its parameters: the graph's code (part of the graph cache's key) then
tells two such calls apart.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
from typing import Any

import numpy as np
import torch

from .jax_convert import to_jax, to_torch

_UNIQUE = itertools.count()


class PrimitiveCall:
    """Calls ``primitive.bind`` on the node's tensors (and the equation's scalar literals)."""

    def __init__(self, primitive: Any, params: dict[str, Any], literals: dict[int, tuple[Any, Any]], arity: int):
        self.primitive = primitive
        self.params = params
        self.literals = literals
        """Position -> (value, JAX dtype) of each literal operand."""
        self.arity = arity
        self.__name__ = primitive.name
        self.__qualname__ = primitive.name
        self.token = f"{primitive.name}:{_digest(params, literals)}"

    def __call__(self, token: str, *tensors: torch.Tensor) -> Any:
        it = iter(tensors)
        args = [np.asarray(self.literals[k][0], dtype=self.literals[k][1]) if k in self.literals else to_jax(next(it))
                for k in range(self.arity)]
        out = self.primitive.bind(*args, **self.params)
        if self.primitive.multiple_results:
            return tuple(to_torch(o) for o in out)
        return to_torch(out)

    def __repr__(self) -> str:
        return f"PrimitiveCall({self.token})"


def _plain(v: Any) -> bool:
    """Whether ``repr(v)`` says all of ``v`` (numbers, strings, dtypes, enums, tuples of them)."""
    if v is None or isinstance(v, (bool, int, float, str, np.dtype, np.generic, enum.Enum)):
        return True
    if isinstance(v, (tuple, list, frozenset)):
        return all(_plain(x) for x in v)
    return False


def _digest(params: dict[str, Any], literals: dict[int, tuple[Any, Any]]) -> str:
    """A digest of the parameters when their text says all of them, else a number of its own (a jaxpr or
    an array among them: two such calls are never taken for one another)."""
    items = sorted(params.items()) + sorted(literals.items())
    if not all(_plain(v) for _, v in items):
        return f"unique{next(_UNIQUE)}"
    return hashlib.sha256(repr(items).encode()).hexdigest()[:12]
