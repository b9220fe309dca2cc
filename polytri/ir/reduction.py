"""Updates: statements that combine a value into the element they write, ``T = T op f``.

A statement *updates* its target ``T`` when its value is ``T`` combined with a term ``f`` by one of
these operations (:data:`OPERATIONS`):

| op | written | combines ``acc`` and ``f`` into | identity | a NaN operand |
|---|---|---|---|---|
| ``+`` | ``T + f``, ``f + T`` | ``acc + f`` | 0 | gives NaN |
| ``-`` | ``T - f`` | ``acc - f`` (partial sums of ``f`` are added) | 0 | gives NaN |
| ``max`` | ``max(T, f)``, ``max(f, T)`` | ``max(acc, f)`` | lowest | gives one operand |
| ``min`` | ``min(T, f)``, ``min(f, T)`` | ``min(acc, f)`` | highest | gives one operand |
| ``nanmax`` | ``nanmax(T, f)`` | ``acc > f ? acc : (acc is NaN ? acc : f)`` | lowest | gives NaN |
| ``nanmin`` | ``nanmin(T, f)`` | ``acc < f ? acc : (acc is NaN ? acc : f)`` | highest | gives NaN |

*lowest* is ``-inf`` for floats and the type's minimum for integers, *highest* ``+inf`` or the maximum.
``max`` and ``min`` are the expression language's functions: ``max(a, b)`` is ``a > b ? a : b``, so a
NaN gives one operand or the other depending on the order (which a chunked reduction changes).
``nanmax`` and ``nanmin`` are its NaN-propagating extremes (PyTorch's ``maximum`` / ``amax``,
``minimum`` / ``amin``): the result is NaN when either operand is NaN, and for equal operands (``-0.0``
and ``+0.0`` included) it is the second one.  :func:`nan_select` gives the select
they are computed with, and the printers (C, Triton, the reference) print exactly that select.

The form is not a field of :class:`~polytri.ir.program.Statement`: the builder, ``@pt.kernel`` and the
frontends write an update as its expression (``A[i] += e`` is kept as ``A[i] = A[i] + e``; ``amax``
writes ``nanmax(M[i], x)``), and :func:`update_of` reads it back.  A field would repeat what the
expression says and could disagree with it.  Recognition looks at the root of the value only (an
``isinstance`` test and a comparison of the target with an operand), so it is not memoized: a memo
keyed by the statement would hash the whole expression tree at every lookup, which costs more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeGuard

from .expr import Binary, Call, Expr

if TYPE_CHECKING:
    from .program import Statement

UpdateOp = Literal["+", "-", "max", "min", "nanmax", "nanmin"]
Identity = Literal["zero", "lowest", "highest"]

#: The NaN-propagating extremes of the expression language, and the comparison each one keeps its first
#: operand on.
NAN_EXTREMES: dict[str, str] = {"nanmax": ">", "nanmin": "<"}


@dataclass(frozen=True, slots=True)
class Operation:
    """How an update's operation combines values (one row of the module docstring's table)."""

    op: UpdateOp
    """The operation's name, as :attr:`Update.op` spells it."""
    identity: Identity
    """The value a combination starts from: 0, the lowest value of the type (``-inf`` for floats) or the
    highest (``+inf``)."""
    partials: UpdateOp
    """The operation that combines partial results of several terms (``+`` for ``-``: the terms are
    summed, then subtracted from the target once)."""
    nan_propagating: bool
    """Whether a NaN operand always gives NaN (the sums, ``nanmax`` and ``nanmin``)."""
    base: UpdateOp
    """The operation without NaN propagation (``max`` for ``nanmax``; itself for the others)."""


#: Every update operation, by name.
OPERATIONS: dict[str, Operation] = {o.op: o for o in (
    Operation("+", "zero", "+", True, "+"),
    Operation("-", "zero", "+", True, "-"),
    Operation("max", "lowest", "max", False, "max"),
    Operation("min", "highest", "min", False, "min"),
    Operation("nanmax", "lowest", "nanmax", True, "max"),
    Operation("nanmin", "highest", "nanmin", True, "min"),
)}


@dataclass(frozen=True, slots=True)
class Update:
    """A value of the form ``T = T op term`` (see the module docstring for the forms of each ``op``)."""

    op: UpdateOp
    """The operation combining the target's old value with :attr:`term`."""
    term: Expr
    """The value combined into the target (``f`` in ``T = T op f``)."""

    @property
    def operation(self) -> Operation:
        """The operation's identity and semantics."""
        return OPERATIONS[self.op]


def update_of(target: Expr, value: Expr) -> Update | None:
    """The update form of ``target = value``, or ``None`` when it is not an update.

    ``target`` and ``value`` may be a statement's own (:func:`statement_update`) or the same with the
    iterators replaced (the Triton printer works on loop counters).  ``T + T`` is ``T + term`` with
    ``term = T``; a ``nanmax`` / ``nanmin`` is an update only with the target first, since its operands
    do not commute (the result for equal operands and the NaN kept are the second's / the first's)."""
    if isinstance(value, Binary) and value.op in ("+", "-"):
        if value.lhs == target:
            return Update(value.op, value.rhs)  # type: ignore[arg-type]
        if value.op == "+" and value.rhs == target:
            return Update("+", value.lhs)
        return None
    if isinstance(value, Call) and value.func in ("max", "min"):
        a, b = value.args
        if a == target:
            return Update(value.func, b)  # type: ignore[arg-type]
        if b == target:
            return Update(value.func, a)  # type: ignore[arg-type]
        return None
    if isinstance(value, Call) and value.func in NAN_EXTREMES and value.args[0] == target:
        return Update(value.func, value.args[1])  # type: ignore[arg-type]
    return None


def statement_update(st: Statement) -> Update | None:
    """:func:`update_of` a statement's target and value."""
    return update_of(st.target, st.value)


def nan_select(e: Call) -> Call:
    """The select that ``nanmax(a, b)`` / ``nanmin(a, b)`` computes: ``where(a > b, a, where(a != a, a,
    b))`` (``<`` for the minimum).  Its type is the promotion of ``a`` and ``b``'s, as for ``max``."""
    a, b = e.args
    keep = Binary(NAN_EXTREMES[e.func], a, b)
    return Call("where", (keep, a, Call("where", (Binary("!=", a, a), a, b))))


def is_nan_extreme(e: Expr) -> TypeGuard[Call]:
    """Whether ``e`` is a call of ``nanmax`` or ``nanmin``."""
    return isinstance(e, Call) and e.func in NAN_EXTREMES
