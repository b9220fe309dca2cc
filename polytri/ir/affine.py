"""Affine (quasi-affine) expressions: checking them and writing them in isl notation.

Subscripts, loop bounds and conditions must be affine in iterators and parameters: sums of integer
multiples of names, integer constants, and floor division or modulo by a positive integer constant.
Loop bounds may also use ``min`` and ``max``.
"""

from __future__ import annotations

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


def to_isl(e: Expr, *, what: str, allow_minmax: bool = False) -> str:
    """isl text of an affine expression; :class:`NotAffineError` naming ``what`` otherwise."""

    def bad(reason: str) -> NotAffineError:
        return NotAffineError(f"{what}: {expr_to_str(e)!s} is not affine: {reason}")

    def rec(n: Expr) -> str:
        c = const_value(n)
        if c is not None:
            return f"({c})"
        if isinstance(n, Var):
            if n.kind == "scalar":
                raise bad(f"{n.name!r} is a run-time scalar, not a parameter or iterator")
            return n.name
        if isinstance(n, Const):
            raise bad(f"the constant {expr_to_str(n)} is not an integer")
        if isinstance(n, Access):
            raise bad(f"it reads array {n.array!r} (indirect accesses are not affine)")
        if isinstance(n, Cast):
            raise bad("it contains a cast")
        if isinstance(n, Unary):
            return f"(-{rec(n.operand)})"
        if isinstance(n, Binary):
            if n.op in ("+", "-"):
                return f"({rec(n.lhs)} {n.op} {rec(n.rhs)})"
            if n.op == "*":
                a, b = const_value(n.lhs), const_value(n.rhs)
                if a is None and b is None:
                    raise bad(f"{expr_to_str(n)} multiplies two non-constant terms")
                if a is not None:
                    return f"({a} * {rec(n.rhs)})"
                return f"({b} * {rec(n.lhs)})"
            if n.op in ("//", "%"):
                d = const_value(n.rhs)
                if d is None or d <= 0:
                    raise bad(f"{expr_to_str(n)} divides by something other than a positive integer constant")
                if n.op == "//":
                    return f"floor(({rec(n.lhs)})/{d})"
                return f"(({rec(n.lhs)}) mod {d})"
            raise bad(f"operator {n.op!r} is not affine")
        if isinstance(n, Call) and n.func in ("min", "max"):
            if not allow_minmax:
                raise bad(f"{n.func}() is only allowed in loop bounds")
            return f"{n.func}({rec(n.args[0])}, {rec(n.args[1])})"
        raise bad(f"{expr_to_str(n)} is not an affine term")

    return rec(e)


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
