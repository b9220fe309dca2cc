"""Statement bodies as immutable expression trees.

Every node is a frozen, slotted dataclass: hashable, comparable, printable.  Names are resolved when a
statement is parsed, so a :class:`Var` already knows whether it is an iterator, a parameter or a scalar.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

#: Binary operators, by the symbol they are written with.
ARITH_OPS = ("+", "-", "*", "/", "//", "%", "**")
COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")
BINARY_OPS = ARITH_OPS + COMPARE_OPS

#: Functions of the expression language and their arity; ``nanmax`` / ``nanmin`` are the NaN-propagating
#: extremes (:mod:`polytri.ir.reduction` gives their semantics and the select they are computed with).
FUNCTIONS: dict[str, int] = {
    "exp": 1, "log": 1, "sqrt": 1, "abs": 1, "tanh": 1, "sigmoid": 1, "erf": 1, "floor": 1, "ceil": 1,
    "round": 1, "min": 2, "max": 2, "where": 3, "nanmax": 2, "nanmin": 2,
}
#: Functions that are another spelling of a binary operator: ``pow(x, y)`` is ``x ** y``.
OPERATOR_FUNCTIONS: dict[str, str] = {"pow": "**"}

VarKind = Literal["iter", "param", "scalar"]


@dataclass(frozen=True, slots=True, eq=False)
class Const:
    """A Python number written in the statement; weakly typed (see :mod:`polytri.dtypes`).

    Equality distinguishes the literal's type (``2``, ``2.0`` and ``True`` are different constants, as
    they have different types) and the sign of zero."""

    value: int | float | bool
    """The literal value."""

    def _key(self) -> tuple[str, str]:
        return type(self.value).__name__, repr(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Const) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True, slots=True)
class Var:
    """A named value that is not an array element."""

    name: str
    """The name as written."""
    kind: VarKind
    """``iter`` (loop iterator), ``param`` (symbolic size) or ``scalar`` (run-time scalar argument)."""


@dataclass(frozen=True, slots=True)
class Access:
    """An array element ``A[e0, e1, ...]``; the subscripts are affine in iterators and parameters."""

    array: str
    """Name of the array."""
    index: tuple[Expr, ...]
    """One affine expression per dimension."""


@dataclass(frozen=True, slots=True)
class Unary:
    """Unary minus (the only unary operator; ``-3`` is folded into a constant)."""

    op: Literal["-"]
    """The operator symbol."""
    operand: Expr
    """The operand."""


@dataclass(frozen=True, slots=True)
class Binary:
    """An arithmetic operator or a comparison."""

    op: str
    """One of :data:`BINARY_OPS`."""
    lhs: Expr
    """Left operand."""
    rhs: Expr
    """Right operand."""


@dataclass(frozen=True, slots=True)
class Call:
    """A function of :data:`FUNCTIONS` (``where(c, a, b)`` is the select)."""

    func: str
    """Function name."""
    args: tuple[Expr, ...]
    """Arguments."""


@dataclass(frozen=True, slots=True)
class Cast:
    """An explicit conversion ``float32(x)``."""

    dtype: str
    """Canonical name of the target dtype."""
    operand: Expr
    """The converted value."""


Expr = Const | Var | Access | Unary | Binary | Call | Cast


def children(e: Expr) -> tuple[Expr, ...]:
    """Direct sub-expressions of ``e`` (subscripts of an access included)."""
    if isinstance(e, Access):
        return e.index
    if isinstance(e, (Unary, Cast)):
        return (e.operand,)
    if isinstance(e, Binary):
        return (e.lhs, e.rhs)
    if isinstance(e, Call):
        return e.args
    return ()


def walk(e: Expr) -> Iterator[Expr]:
    """All nodes of ``e`` in pre-order."""
    yield e
    for c in children(e):
        yield from walk(c)


def accesses(e: Expr) -> list[Access]:
    """Array accesses of ``e``, in pre-order, duplicates kept."""
    return [n for n in walk(e) if isinstance(n, Access)]


def var_names(e: Expr, kind: VarKind) -> set[str]:
    """Names of the variables of one kind used in ``e``."""
    return {n.name for n in walk(e) if isinstance(n, Var) and n.kind == kind}


def transform(e: Expr, replace: Callable[[Expr], Expr | None]) -> Expr:
    """``e`` rebuilt bottom-up, each node first offered to ``replace`` (pre-order): a non-``None`` result
    takes the node's place, ``None`` keeps the node and transforms its children."""
    new = replace(e)
    if new is not None:
        return new
    if isinstance(e, Access):
        return Access(e.array, tuple(transform(i, replace) for i in e.index))
    if isinstance(e, Unary):
        return Unary(e.op, transform(e.operand, replace))
    if isinstance(e, Binary):
        return Binary(e.op, transform(e.lhs, replace), transform(e.rhs, replace))
    if isinstance(e, Call):
        return Call(e.func, tuple(transform(a, replace) for a in e.args))
    if isinstance(e, Cast):
        return Cast(e.dtype, transform(e.operand, replace))
    return e


def substitute(e: Expr, env: Mapping[str, Expr]) -> Expr:
    """``e`` with iterator variables replaced by expressions (subscripts included)."""
    return transform(e, lambda n: env.get(n.name) if isinstance(n, Var) and n.kind == "iter" else None)


def conjunction(conds: list[Expr]) -> Expr | None:
    """``conds`` joined by ``and`` (``None`` for none)."""
    if not conds:
        return None
    out = conds[0]
    for c in conds[1:]:
        out = Binary("and", out, c)
    return out
