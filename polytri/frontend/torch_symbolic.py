"""Sizes of FX graphs as affine texts: ints stay ints, SymInts (dynamic sizes) become isl parameters."""

from __future__ import annotations

import re
from typing import Any

import sympy
import torch

from ..errors import ProgramError
from ..ir.names import check_identifier
from .torch_values import LoweringError


def param_name(symbol: str) -> str:
    """The program parameter of a sympy symbol (``s0`` stays ``s0`` unless reserved)."""
    try:
        check_identifier(symbol, "parameter")
        return symbol
    except ProgramError:
        return "p_" + re.sub(r"\W", "_", symbol)


def _expr(x: Any) -> sympy.Expr:
    if isinstance(x, torch.SymInt):
        return sympy.sympify(x.node.expr)
    if isinstance(x, (int, sympy.Expr)) and not isinstance(x, bool):
        return sympy.sympify(x)
    raise LoweringError(f"size {x!r} is not an integer")


def size_text(x: Any, params: set[str] | None = None) -> str:
    """Affine text of a size (an int or a SymInt); the parameters it uses are added to ``params``.  The
    size may be quasi-affine: floor divisions of affine sizes by constants (a strided convolution's output,
    ``(s - 1) // 2 + 1``), which isl takes as they are."""
    return _affine_text(sympy.expand(_expr(x)), params)


def _floor_div(term: sympy.Expr, params: set[str] | None) -> str | None:
    """``(a) // c`` for torch's ``FloorDiv(a, c)`` with ``a`` quasi-affine and ``c`` a positive integer."""
    if type(term).__name__ != "FloorDiv" or len(term.args) != 2:
        return None
    num, den = term.args
    if not (den.is_Integer and int(den) > 0):
        raise LoweringError(f"size {term} divides by {den}, not by a positive constant")
    return f"({_affine_text(sympy.expand(num), params)}) // {int(den)}"


def _affine_text(e: sympy.Expr, params: set[str] | None) -> str:
    if e.is_Integer:
        return str(int(e))
    poly_terms = []
    for term, coeff in e.as_coefficients_dict().items():
        if not (coeff.is_Integer):
            raise LoweringError(f"size {e} is not affine with integer coefficients")
        if term == 1:
            poly_terms.append(str(int(coeff)))
            continue
        c = int(coeff)
        quotient = _floor_div(term, params)
        if quotient is not None:
            poly_terms.append(quotient if c == 1 else f"{c}*{quotient}")
            continue
        if not term.is_Symbol:
            raise LoweringError(f"size {e} is not affine in the dynamic sizes")
        name = param_name(str(term))
        if params is not None:
            params.add(name)
        poly_terms.append(name if c == 1 else f"{c}*{name}")
    return " + ".join(poly_terms).replace("+ -", "- ") if poly_terms else "0"


def symbol_of(x: Any) -> str | None:
    """The parameter a size is equal to, when the size is a bare symbol."""
    if isinstance(x, torch.SymInt):
        e = sympy.sympify(x.node.expr)
        if e.is_Symbol:
            return param_name(str(e))
    return None
