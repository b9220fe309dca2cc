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
    """Affine text of a size (an int or a SymInt); the parameters it uses are added to ``params``."""
    e = sympy.expand(_expr(x))
    if e.is_Integer:
        return str(int(e))
    poly_terms = []
    for term, coeff in e.as_coefficients_dict().items():
        if not (coeff.is_Integer):
            raise LoweringError(f"size {e} is not affine with integer coefficients")
        if term == 1:
            poly_terms.append(str(int(coeff)))
            continue
        if not term.is_Symbol:
            raise LoweringError(f"size {e} is not affine in the dynamic sizes")
        name = param_name(str(term))
        if params is not None:
            params.add(name)
        c = int(coeff)
        poly_terms.append(name if c == 1 else f"{c}*{name}")
    return " + ".join(poly_terms).replace("+ -", "- ") if poly_terms else "0"


def symbol_of(x: Any) -> str | None:
    """The parameter a size is equal to, when the size is a bare symbol."""
    if isinstance(x, torch.SymInt):
        e = sympy.sympify(x.node.expr)
        if e.is_Symbol:
            return param_name(str(e))
    return None
