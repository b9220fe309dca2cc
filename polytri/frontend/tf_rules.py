"""The table of translations from TensorFlow operations to ATen calls, and what a translation is handed.

A rule receives a :class:`TfOp`: the graph being built, the operation (its type and attributes), its
operands as graph operands (nodes, or :class:`.Const` scalars) and, for the operands known while
translating (constants, shapes), their values; it returns one operand per output.  A rule that cannot
translate an operation raises :class:`.Declined`: the operation then runs through TensorFlow itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch.fx as fx

from .jax_graph import GraphBuilder, Operand, shape_of
from .jax_rules import Declined, Out, registrar

__all__ = ["RULES", "Declined", "Out", "TfOp", "rule"]


@dataclass(frozen=True)
class TfOp:
    """One TensorFlow operation as a rule sees it."""

    b: GraphBuilder
    op: Any
    """The ``tf.Operation``."""
    operand: Callable[[int], Operand]
    """The ``k``-th input as a graph operand (a constant one becomes a constant node or a :class:`Const`)."""
    value: Callable[[int], np.ndarray | None]
    """The ``k``-th input's value when it is known while translating, else ``None``."""
    outs: Sequence[Out]

    @property
    def type(self) -> str:
        return str(self.op.type)

    @property
    def out(self) -> Out:
        """The only output."""
        return self.outs[0]

    @property
    def arity(self) -> int:
        return len(self.op.inputs)

    def arg(self, k: int) -> Operand:
        return self.operand(k)

    def node(self, k: int) -> fx.Node:
        """The ``k``-th input as a tensor node."""
        return self.b.tensor(self.operand(k))

    def shape(self, k: int) -> tuple[int, ...]:
        """The static shape of the ``k``-th input."""
        x = self.operand(k)
        return shape_of(x) if isinstance(x, fx.Node) else ()

    def static(self, k: int) -> np.ndarray:
        """The value of the ``k``-th input (a shape, an axis...); :class:`Declined` when it is computed at
        run time."""
        v = self.value(k)
        if v is None:
            raise Declined(f"{self.type}: input {k} is computed at run time")
        return v

    def ints(self, k: int) -> list[int]:
        """The ``k``-th input's value as a list of ints."""
        return [int(v) for v in np.asarray(self.static(k)).reshape(-1)]

    def attr(self, name: str, default: Any = None) -> Any:
        """An attribute of the operation (bytes decoded), or ``default`` when it has none of that name."""
        try:
            v = self.op.get_attr(name)
        except ValueError:
            return default
        return v.decode() if isinstance(v, bytes) else v


Rule = Callable[[TfOp], Sequence[Operand]]

RULES: dict[str, Rule] = {}
rule = registrar(RULES)
"""Register a translation for the operation types ``names``."""


def axis(a: int, rank: int) -> int:
    """A possibly negative axis of a tensor of rank ``rank``, in ``[0, rank)``."""
    if not -rank <= a < max(rank, 1):
        raise Declined(f"axis {a} out of range for rank {rank}")
    return a % rank if rank else 0
