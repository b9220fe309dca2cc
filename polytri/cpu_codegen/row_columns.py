"""The columns of each row of a contraction whose target is not a box: a triangle (syrk's ``j <= i``).

A statement of contraction form whose domain bounds the columns ``b`` by the rows ``a`` (constraints on
``a`` and ``b`` together, none with the sum) computes, for row ``a``, the columns ``[lo(a), hi(a))``.  The
packed nest (:mod:`.packing`) then runs the micro-kernel on every register block inside the triangle,
skips the blocks outside it, and computes a block across its edge in a tile of its own, storing only the
elements of the triangle; the threads share the rows by the number of columns they hold.  Each element's
sum still runs over ``k`` in order, so the values are those of the loops, bit for bit.

:func:`row_columns` derives ``lo`` and ``hi`` with isl, as expressions in ``a`` and the parameters: the
set of columns of row ``a`` (``a`` a parameter), its minimum and maximum.
"""

from __future__ import annotations

import islpy as isl

from ..errors import NotAffineError
from ..ir.affine import condition_to_isl, to_isl
from ..ir.expr import Binary, Const, Expr
from ..ir.program import Program, Statement, params_prefix
from ..schedule.loop_ast import isl_expr


def row_columns(st: Statement, program: Program, a: str, b: str, b_bounds: tuple[Expr, Expr],
                rows: list[Expr], triangle: list[Expr]) -> tuple[Expr, Expr] | None:
    """``[lo(a), hi(a))``: the columns of row ``a`` of ``st`` within ``b_bounds``, given the conditions on
    the rows alone (``rows``) and on the rows and columns together (``triangle``); ``None`` where either
    bound is piecewise or some row has no column (a row of the box that the nest would not write)."""
    what = f"{st.name}: the columns of each row"
    space = params_prefix((*program.params, a))
    try:
        on_rows = [condition_to_isl(c, what=what) for c in rows]
        on_columns = [condition_to_isl(c, what=what) for c in triangle]
        lo, hi = (to_isl(e, what=what, allow_minmax=True) for e in b_bounds)
    except NotAffineError:
        return None
    row_set = isl.Set(f"{space}{{ : {' and '.join(on_rows) or 'true'} }}").intersect_params(program.context)
    columns = isl.Set(f"{space}{{ [{b}] : {' and '.join([*on_rows, *on_columns, f'{lo} <= {b} < {hi}'])} }}")
    columns = columns.intersect_params(row_set)
    first, last = columns.dim_min(0), columns.dim_max(0)
    if first.n_piece() != 1 or last.n_piece() != 1 or not row_set.is_subset(first.domain()):
        return None
    build = isl.AstBuild.from_context(row_set)
    return (isl_expr(build.expr_from_pw_aff(first.gist(row_set)), program.params),
            Binary("+", isl_expr(build.expr_from_pw_aff(last.gist(row_set)), program.params), Const(1)))


__all__ = ["row_columns"]
