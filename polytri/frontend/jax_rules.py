"""The table of translations from JAX primitives to ATen calls, and what a translation is handed.

A rule receives the graph being built, the equation's operands (nodes, or :class:`.Const` scalars), its
parameters and the shapes and dtypes of its results, and returns one operand per result.  A rule that
cannot translate an equation raises :class:`Declined`: the equation then runs through JAX itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from ..errors import UnsupportedError
from .jax_graph import Const, GraphBuilder, Operand, node_val


class Declined(UnsupportedError):
    """An equation that a rule does not translate (its parameters or dtypes): it runs through JAX."""


@dataclass(frozen=True)
class Out:
    """The shape and dtype of one result of an equation."""

    shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class Eqn:
    """One jaxpr equation as a rule sees it."""

    primitive: str
    args: Sequence[Operand]
    params: dict[str, Any]
    outs: Sequence[Out]

    @property
    def out(self) -> Out:
        """The only result."""
        return self.outs[0]


Rule = Callable[[GraphBuilder, Eqn], Sequence[Operand]]

F = TypeVar("F", bound=Callable[..., Any])


def registrar(table: dict[str, Any]) -> Callable[..., Callable[[F], F]]:
    """The decorator ``@rule(name, ...)`` that files a translation in ``table`` under each name (the
    primitives of JAX, the operation types of TensorFlow)."""
    def rule(*names: str) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            for n in names:
                table[n] = fn
            return fn
        return deco
    return rule


RULES: dict[str, Rule] = {}
rule = registrar(RULES)
"""Register a translation for the primitives ``names``."""


#: JAX dtype names -> torch dtypes.
TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8,
    "uint16": torch.uint16, "uint32": torch.uint32, "uint64": torch.uint64, "bool": torch.bool,
    "complex64": torch.complex64, "complex128": torch.complex128,
}


def torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype of a JAX (numpy) dtype; :class:`UnsupportedError` for one torch lacks."""
    name = str(getattr(dtype, "name", dtype))
    if name not in TORCH_DTYPES:
        raise UnsupportedError(f"JAX dtype {name} has no torch equivalent")
    return TORCH_DTYPES[name]


def check_results(name: str, res: list[Operand], outs: list[Out]) -> None:
    """A translation's results have the framework's shapes and dtypes, ``outs`` (else :class:`Declined`)."""
    if len(res) != len(outs):
        raise Declined(f"{name}: {len(res)} result(s) for {len(outs)}")
    for x, o in zip(res, outs):
        if isinstance(x, Const):
            ok = o.shape == () and x.dtype == o.dtype
        else:
            val = node_val(x)
            ok = tuple(val.shape) == o.shape and val.dtype == o.dtype
        if not ok:
            raise Declined(f"{name}: translated to {x}, not {o}")
