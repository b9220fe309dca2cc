"""Expression trees -> canonical text (the inverse of :mod:`polytri.ir.parse`).

Parentheses are placed by precedence, so ``parse(print(e)) == e`` for every tree the parser can build.
"""

from __future__ import annotations

import math

from .expr import COMPARE_OPS, Access, Binary, Call, Cast, Const, Expr, Unary, Var

_ATOM = 6
_POW = 5
_UNARY = 4
# "and" / "or" come only from isl's loop ASTs (bounds and guards): printed for messages, not parsed back
_PREC = {"or": -1, "and": 0, "+": 2, "-": 2, "*": 3, "/": 3, "//": 3, "%": 3, "**": _POW,
         **{op: 1 for op in COMPARE_OPS}}


def format_const(value: int | float | bool) -> str:
    """Literal text of a constant; infinities print as ``1e999`` so they parse back."""
    if isinstance(value, bool) or isinstance(value, int):
        return repr(value)
    if math.isinf(value):
        return "1e999" if value > 0 else "-1e999"
    if math.isnan(value):
        raise ValueError("NaN has no literal form in polytri's expression language")
    return repr(float(value))


def _prec(e: Expr) -> int:
    if isinstance(e, Binary):
        return _PREC[e.op]
    if isinstance(e, Unary):
        return _UNARY
    if isinstance(e, Const) and not isinstance(e.value, bool) and (e.value < 0 or format_const(e.value).startswith("-")):
        return _UNARY
    return _ATOM


def _wrap(e: Expr, need: bool) -> str:
    s = expr_to_str(e)
    return f"({s})" if need else s


def expr_to_str(e: Expr) -> str:
    """Canonical text of an expression."""
    if isinstance(e, Const):
        return format_const(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Access):
        return f"{e.array}[{', '.join(expr_to_str(i) for i in e.index)}]"
    if isinstance(e, Unary):
        return "-" + _wrap(e.operand, _prec(e.operand) < _UNARY)
    if isinstance(e, Binary):
        p = _PREC[e.op]
        if e.op == "**":
            left, right = _prec(e.lhs) <= p, _prec(e.rhs) < p
        elif p == 1:
            left, right = _prec(e.lhs) <= p, _prec(e.rhs) <= p
        else:
            left, right = _prec(e.lhs) < p, _prec(e.rhs) <= p
        return f"{_wrap(e.lhs, left)} {e.op} {_wrap(e.rhs, right)}"
    if isinstance(e, Call):
        return f"{e.func}({', '.join(expr_to_str(a) for a in e.args)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({expr_to_str(e.operand)})"
    raise TypeError(f"not an expression node: {e!r}")
