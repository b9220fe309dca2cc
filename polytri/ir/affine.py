"""Affine (quasi-affine) expressions: checking them and writing them in isl notation.

Subscripts, loop bounds and conditions must be affine in iterators and parameters: sums of integer
multiples of names, integer constants, and floor division or modulo by a positive integer constant.
Loop bounds may also use ``min`` and ``max``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import NotAffineError
from .expr import Access, Binary, Call, Cast, Const, Expr, Unary, Var
from .printer import expr_to_str


def const_value(e: Expr) -> int | None:
    """The value of ``e`` if it is an integer constant expression, else ``None``."""
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, Unary):
        v = const_value(e.operand)
        return None if v is None else -v
    if isinstance(e, Binary) and e.op in ("+", "-", "*", "//", "%"):
        a, b = const_value(e.lhs), const_value(e.rhs)
        if a is None or b is None:
            return None
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if b > 0:
            return a // b if e.op == "//" else a % b
    return None


class _IslWriter:
    """Writes one affine expression in isl notation; every failure names the whole expression."""

    def __init__(self, whole: Expr, what: str, allow_minmax: bool):
        self.whole = whole
        self.what = what
        self.allow_minmax = allow_minmax

    def bad(self, reason: str) -> NotAffineError:
        """The error for the whole expression, with ``reason``."""
        return NotAffineError(f"{self.what}: {expr_to_str(self.whole)!s} is not affine: {reason}")

    def write(self, n: Expr) -> str:
        """isl text of the sub-expression ``n``: integer constants folded, other nodes by kind."""
        c = const_value(n)
        if c is not None:
            return f"({c})"
        return _ISL_WRITERS.get(type(n), _IslWriter.other)(self, n)

    def var(self, n: Var) -> str:
        if n.kind == "scalar":
            raise self.bad(f"{n.name!r} is a run-time scalar, not a parameter or iterator")
        return n.name

    def const(self, n: Const) -> str:
        raise self.bad(f"the constant {expr_to_str(n)} is not an integer")

    def access(self, n: Access) -> str:
        raise self.bad(f"it reads array {n.array!r} (indirect accesses are not affine)")

    def cast(self, n: Cast) -> str:
        raise self.bad("it contains a cast")

    def unary(self, n: Unary) -> str:
        return f"(-{self.write(n.operand)})"

    def binary(self, n: Binary) -> str:
        if n.op in ("+", "-"):
            return f"({self.write(n.lhs)} {n.op} {self.write(n.rhs)})"
        if n.op == "*":
            return self.product(n)
        if n.op in ("//", "%"):
            return self.division(n)
        raise self.bad(f"operator {n.op!r} is not affine")

    def product(self, n: Binary) -> str:
        """``c * x`` or ``x * c`` with ``c`` an integer constant, written ``(c * x)``."""
        a, b = const_value(n.lhs), const_value(n.rhs)
        if a is not None:
            return f"({a} * {self.write(n.rhs)})"
        if b is not None:
            return f"({b} * {self.write(n.lhs)})"
        raise self.bad(f"{expr_to_str(n)} multiplies two non-constant terms")

    def division(self, n: Binary) -> str:
        """``x // d`` or ``x % d`` with ``d`` a positive integer constant."""
        d = const_value(n.rhs)
        if d is None or d <= 0:
            raise self.bad(f"{expr_to_str(n)} divides by something other than a positive integer constant")
        if n.op == "//":
            return f"floor(({self.write(n.lhs)})/{d})"
        return f"(({self.write(n.lhs)}) mod {d})"

    def other(self, n: Expr) -> str:
        raise self.bad(f"{expr_to_str(n)} is not an affine term")

    def call(self, n: Call) -> str:
        if n.func not in ("min", "max"):
            return self.other(n)
        if not self.allow_minmax:
            raise self.bad(f"{n.func}() is only allowed in loop bounds")
        return f"{n.func}({self.write(n.args[0])}, {self.write(n.args[1])})"


_ISL_WRITERS: dict[type, Callable[[_IslWriter, Any], str]] = {
    Var: _IslWriter.var, Const: _IslWriter.const, Access: _IslWriter.access, Cast: _IslWriter.cast,
    Unary: _IslWriter.unary, Binary: _IslWriter.binary, Call: _IslWriter.call,
}


def to_isl(e: Expr, *, what: str, allow_minmax: bool = False) -> str:
    """isl text of an affine expression; :class:`NotAffineError` naming ``what`` otherwise."""
    return _IslWriter(e, what, allow_minmax).write(e)


def condition_to_isl(e: Expr, *, what: str) -> str:
    """isl text of an affine condition: comparisons of affine expressions (``!=`` included)."""
    if isinstance(e, Binary) and e.op in ("<", "<=", ">", ">=", "==", "!="):
        lhs = to_isl(e.lhs, what=what, allow_minmax=True)
        rhs = to_isl(e.rhs, what=what, allow_minmax=True)
        if e.op == "!=":
            return f"({lhs} < {rhs} or {lhs} > {rhs})"
        op = "=" if e.op == "==" else e.op
        return f"({lhs} {op} {rhs})"
    raise NotAffineError(f"{what}: {expr_to_str(e)} is not an affine comparison")


def evaluate(e: Expr, env: dict[str, int]) -> int:
    """Value of an affine expression for integer values of its names (``min``/``max`` allowed)."""
    c = const_value(e)
    if c is not None:
        return c
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Unary):
        return -evaluate(e.operand, env)
    if isinstance(e, Binary):
        a, b = evaluate(e.lhs, env), evaluate(e.rhs, env)
        ops = {"+": a + b, "-": a - b, "*": a * b}
        if e.op in ops:
            return ops[e.op]
        if e.op == "//":
            return a // b
        if e.op == "%":
            return a % b
    if isinstance(e, Call) and e.func in ("min", "max"):
        vals = [evaluate(x, env) for x in e.args]
        return min(vals) if e.func == "min" else max(vals)
    raise NotAffineError(f"cannot evaluate {expr_to_str(e)} as an affine expression")


def linear(e: Expr) -> tuple[dict[str, int], int] | None:
    """``e`` as ``sum(coeff * name) + const``, or ``None`` when it uses floor division or modulo."""
    c = const_value(e)
    if c is not None:
        return {}, c
    if isinstance(e, Var):
        return {e.name: 1}, 0
    if isinstance(e, Unary):
        r = linear(e.operand)
        return None if r is None else ({k: -v for k, v in r[0].items()}, -r[1])
    if isinstance(e, Binary) and e.op in ("+", "-"):
        a, b = linear(e.lhs), linear(e.rhs)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "+" else -1
        coeffs = dict(a[0])
        for k, v in b[0].items():
            coeffs[k] = coeffs.get(k, 0) + sign * v
        return {k: v for k, v in coeffs.items() if v}, a[1] + sign * b[1]
    if isinstance(e, Binary) and e.op == "*":
        ca, cb = const_value(e.lhs), const_value(e.rhs)
        factor, other = (ca, e.rhs) if ca is not None else (cb, e.lhs)
        if factor is None:
            return None
        r = linear(other)
        return None if r is None else ({n: factor * v for n, v in r[0].items() if factor * v}, factor * r[1])
    return None
