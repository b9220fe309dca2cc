"""How much work a subtree of the loop AST runs: an upper bound, symbolic in the parameters and the
counters of the loops around it.

The bound is a sum of terms ``weight x trip_1 x ... x trip_k``: one term per statement the subtree runs,
``weight`` the operations of one instance of it, ``trip_i`` the trip count of each loop between the
subtree's root and the statement.  A loop's bounds may depend on the counters of loops inside the subtree
(a triangle); those counters are replaced by their ranges (interval arithmetic), so every trip count is an
expression of the parameters and outer counters only, and an upper bound of the true count.  A guard
counts as if it held.  The bound serves decisions that need the order of magnitude (is a parallel region
worth its fork and join?), not an exact count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..ir.affine import const_value, evaluate
from ..ir.expr import Binary, Call, Const, Expr, Unary, Var, children
from .loop_ast import Block, For, Node, Run, loop_upper

Range = tuple[Expr, Expr]
"""Smallest and largest value of an integer expression."""


@dataclass(frozen=True)
class Term:
    """``weight`` operations run ``trips[0] x trips[1] x ...`` times."""

    weight: int
    trips: tuple[Expr, ...]


@dataclass(frozen=True)
class Work:
    """An upper bound on the operations a subtree runs: the sum of its terms; ``None`` when a bound
    could not be expressed (a non-affine loop bound)."""

    terms: tuple[Term, ...] | None

    def value(self, env: Mapping[str, int] | None = None) -> float | None:
        """The bound for the parameters and counters in ``env`` (none: only a constant bound has a
        value); ``None`` when unknown."""
        if self.terms is None:
            return None
        total = 0.0
        for t in self.terms:
            try:
                trips = [evaluate(e, dict(env or {})) for e in t.trips]
            except KeyError:  # a name without a value: the bound is symbolic
                return None
            total += t.weight * math.prod(float(v) for v in trips)
        return total

    def loosened(self) -> Work:
        """A shorter bound, never smaller: each trip count with a constant upper bound (a tile's point
        loop) replaced by that constant (:func:`constant_bound`), the others by :func:`short_bound`, and
        terms of equal trip counts summed."""
        if self.terms is None:
            return self
        merged: dict[tuple[Expr, ...], int] = {}
        for t in self.terms:
            trips = tuple(short_bound(e) if (b := constant_bound(e)) is None else Const(b) for e in t.trips)
            merged[trips] = merged.get(trips, 0) + t.weight
        return Work(tuple(Term(w, trips) for trips, w in merged.items()))


def _offset(e: Expr) -> tuple[Expr | None, int]:
    """``e`` as ``base + k`` with ``k`` a constant (``base`` ``None`` for a constant)."""
    v = const_value(e)
    if v is not None:
        return None, v
    if isinstance(e, Binary) and e.op in "+-":
        k = const_value(e.rhs)
        if k is not None:
            return e.lhs, k if e.op == "+" else -k
    return e, 0


def _add(a: Expr, b: Expr) -> Expr:
    """``a + b``, its constants folded together."""
    (x, i), (y, j) = _offset(a), _offset(b)
    if x is not None and y is not None:
        base: Expr | None = Binary("+", x, y)
    else:
        base = x if y is None else y
    k = i + j
    if base is None:
        return Const(k)
    return base if k == 0 else Binary("+" if k > 0 else "-", base, Const(abs(k)))


def _sub(a: Expr, b: Expr) -> Expr:
    """``a - b``, its constants folded together."""
    y, j = _offset(b)
    if y is None:
        return _add(a, Const(-j))
    x, i = _offset(a)
    if x is None:  # a constant minus an expression
        return _add(Unary("-", y), Const(i - j))
    return _add(Binary("-", a, y), Const(-j))


def _call(f: str, a: Expr, b: Expr) -> Expr:
    x, y = const_value(a), const_value(b)
    if x is not None and y is not None:
        return Const(min(x, y) if f == "min" else max(x, y))
    return a if a == b else Call(f, (a, b))


def _scaled(c: int, r: Range) -> Range:
    lo, hi = (Binary("*", Const(c), r[0]), Binary("*", Const(c), r[1]))
    return (lo, hi) if c >= 0 else (hi, lo)


def _binary_range(e: Binary, ranges: Mapping[str, Range]) -> Range | None:
    a = expr_range(e.lhs, ranges)
    b = expr_range(e.rhs, ranges)
    if a is None or b is None:
        return None
    if e.op == "+":
        return _add(a[0], b[0]), _add(a[1], b[1])
    if e.op == "-":
        return _sub(a[0], b[1]), _sub(a[1], b[0])
    cl, cr = const_value(e.lhs), const_value(e.rhs)
    if e.op == "*" and (cl is not None or cr is not None):
        return _scaled(cl, b) if cl is not None else _scaled(cr, a)  # type: ignore[arg-type]
    if e.op == "//" and cr is not None and cr > 0:
        return Binary("//", a[0], e.rhs), Binary("//", a[1], e.rhs)
    if e.op == "%" and cr is not None and cr > 0:
        return Const(0), Const(cr - 1)
    return None


def expr_range(e: Expr, ranges: Mapping[str, Range]) -> Range | None:
    """The range of the integer expression ``e`` when each counter in ``ranges`` takes any value of its
    range (other names stay symbols); ``None`` for an expression outside the affine loop-bound forms."""
    if isinstance(e, Const):
        return e, e
    if isinstance(e, Var):
        return ranges.get(e.name, (e, e)) if e.kind == "iter" else (e, e)
    if isinstance(e, Unary) and e.op == "-":
        r = expr_range(e.operand, ranges)
        return None if r is None else (_sub(Const(0), r[1]), _sub(Const(0), r[0]))
    if isinstance(e, Binary):
        return _binary_range(e, ranges)
    if isinstance(e, Call) and e.func in ("min", "max", "where"):
        x, y = (expr_range(a, ranges) for a in e.args[-2:])  # (where: the two branches)
        if x is None or y is None:
            return None
        if e.func == "where":  # either branch
            return _call("min", x[0], y[0]), _call("max", x[1], y[1])
        return _call(e.func, x[0], y[0]), _call(e.func, x[1], y[1])
    return None


# -- min/max-outermost normal form: a tree of min and max whose leaves are linear forms -------------------
@dataclass(frozen=True)
class Linear:
    """``sum(coefficient x atom) + constant``; an atom is a variable or an expression kept whole."""

    terms: tuple[tuple[Expr, int], ...]
    constant: int

    def plus(self, other: Linear) -> Linear:
        coef: dict[Expr, int] = dict(self.terms)
        for atom, k in other.terms:
            coef[atom] = coef.get(atom, 0) + k
        return Linear(tuple((x, k) for x, k in coef.items() if k), self.constant + other.constant)


@dataclass(frozen=True)
class MinMax:
    """``min(a, b)`` or ``max(a, b)``."""

    op: str
    a: Form
    b: Form


Form = Linear | MinMax
MAX_LEAVES = 64
"""Larger normal forms are not built (distributing ``-`` over ``min`` doubles the leaves)."""


def _scale(f: Form, c: int) -> Form:
    if isinstance(f, MinMax):
        op = {"min": "max", "max": "min"}[f.op] if c < 0 else f.op
        return MinMax(op, _scale(f.a, c), _scale(f.b, c))
    return Linear(tuple((x, c * k) for x, k in f.terms if c * k), c * f.constant)


def _plus(a: Form, b: Form) -> Form:
    if isinstance(a, MinMax):
        return MinMax(a.op, _plus(a.a, b), _plus(a.b, b))
    if isinstance(b, MinMax):
        return MinMax(b.op, _plus(a, b.a), _plus(a, b.b))
    return a.plus(b)


def _leaves(f: Form) -> int:
    return _leaves(f.a) + _leaves(f.b) if isinstance(f, MinMax) else 1


def normal_form(e: Expr) -> Form:
    """``e`` with every ``min``/``max`` moved above the additions (``min(a, b) + c = min(a + c, b + c)``,
    ``-min(a, b) = max(-a, -b)``), so that equal terms cancel in a difference."""
    c = const_value(e)
    if c is not None:
        return Linear((), c)
    if isinstance(e, Unary) and e.op == "-":
        return _scale(normal_form(e.operand), -1)
    if isinstance(e, Binary) and e.op in "+-":
        a, b = normal_form(e.lhs), normal_form(e.rhs)
        if _leaves(a) * _leaves(b) <= MAX_LEAVES:
            return _plus(a, b if e.op == "+" else _scale(b, -1))
    if isinstance(e, Binary) and e.op == "*":
        left = const_value(e.lhs)
        k, other = (left, e.rhs) if left is not None else (const_value(e.rhs), e.lhs)
        if k is not None:
            return _scale(normal_form(other), k)
    if isinstance(e, Call) and e.func in ("min", "max"):
        return MinMax(e.func, normal_form(e.args[0]), normal_form(e.args[1]))
    return Linear(((e, 1),), 0)


def form_expr(f: Form) -> Expr:
    """The expression of a normal form."""
    if isinstance(f, MinMax):
        return _call(f.op, form_expr(f.a), form_expr(f.b))
    out: Expr | None = None
    for atom, k in f.terms:
        term = atom if abs(k) == 1 else Binary("*", Const(abs(k)), atom)
        out = (Unary("-", term) if k < 0 else term) if out is None else Binary("+" if k > 0 else "-", out, term)
    return Const(f.constant) if out is None else _add(out, Const(f.constant))


def constant_bound(e: Expr) -> int | None:
    """A constant upper bound of ``e`` read off its normal form (a ``min`` is at most either side, a
    ``max`` at most the larger of both), or ``None``: ``min(N - 32 t, 32)`` is at most 32, ``t // 16`` has
    none."""
    def bound(f: Form) -> int | None:
        if isinstance(f, Linear):
            return None if f.terms else f.constant
        a, b = bound(f.a), bound(f.b)
        if f.op == "min":
            return b if a is None else a if b is None else min(a, b)
        return None if a is None or b is None else max(a, b)
    return bound(normal_form(e))


def _size(e: Expr) -> int:
    return 1 + sum(_size(c) for c in children(e))


def short_bound(e: Expr) -> Expr:
    """An upper bound of ``e`` with fewer terms: in its normal form each ``min`` keeps only its smaller
    side (by expression size), since ``min(a, b) <= a``; a ``max`` keeps both sides."""
    def shorten(f: Form) -> Form:
        if isinstance(f, Linear):
            return f
        a, b = shorten(f.a), shorten(f.b)
        if f.op == "max":
            return MinMax("max", a, b)
        return a if _size(form_expr(a)) <= _size(form_expr(b)) else b
    return form_expr(shorten(normal_form(e)))


def trip_count(loop: For, ranges: Mapping[str, Range]) -> tuple[Expr, Range] | None:
    """An upper bound of ``loop``'s trip count, and its counter's range.  The count ``upper - lower`` is
    put in normal form before the counters of loops inside the subtree take their ranges, so that a
    point loop ``32 t <= i < min(N, 32 t + 32)`` counts ``min(N - 32 t, 32) <= 32``, not ``N``."""
    upper = loop_upper(loop)
    if upper is None:
        return None
    lo = expr_range(loop.lower, ranges)
    hi = expr_range(upper, ranges)
    count = expr_range(form_expr(normal_form(Binary("-", upper, loop.lower))), ranges)
    if lo is None or hi is None or count is None:
        return None
    span = count[1]
    if loop.step != 1:
        span = Binary("//", _add(span, Const(loop.step - 1)), Const(loop.step))
    return _call("max", Const(0), span), (lo[0], _sub(hi[1], Const(1)))


def _terms(n: Node, ranges: dict[str, Range], weight: Callable[[str], int]) -> list[Term] | None:
    if isinstance(n, Run):
        return [Term(weight(n.statement), ())]
    if isinstance(n, For):
        trip = trip_count(n, ranges)
        if trip is None:
            return None
        inner = _terms(n.body, {**ranges, n.var: trip[1]}, weight)
        return None if inner is None else [Term(t.weight, (trip[0], *t.trips)) for t in inner]
    children = n.body if isinstance(n, Block) else (n.then,) + ((n.orelse,) if n.orelse is not None else ())
    out: list[Term] = []
    for c in children:
        got = _terms(c, ranges, weight)
        if got is None:
            return None
        out += got
    return out


def loop_work(n: Node, weight: Callable[[str], int]) -> Work:
    """The work bound of the subtree ``n`` (see the module's text); ``weight(statement)`` is the cost of
    one instance of a statement."""
    terms = _terms(n, {}, weight)
    return Work(None if terms is None else tuple(terms))


__all__ = ["Term", "Work", "constant_bound", "expr_range", "short_bound", "loop_work", "trip_count"]
