"""The statement form of a contraction (a gemm's update), shared by the scheduler and the C generator.

A statement is in contraction form when it is a sum update (:mod:`.reduction`) that reads

    T[..., a, ..., b] = T[..., a, ..., b] + L * R        (or ``-``; or ``L * R + T[...]``)

where the target's last subscript is an iterator ``b`` (the columns), another of its subscripts is an
iterator ``a`` (the rows: the last such subscript that ``R`` does not use), no other subscript of the
target uses ``a`` or ``b``, at least one more iterator (summed over) appears in ``L * R``, ``L`` does not
use ``b``, ``R`` does not use ``a``, and neither reads ``T``'s array.  A gemm has ``a`` just before
``b``; a convolution ``O[n, co, oh, ow] += W[co, ci, kh, kw] * X[n, ci, oh + kh, ow + kw]`` has rows
``co``, columns ``ow`` and sums over ``ci, kh, kw``.  The C generator computes such a nest with packed
panels and a micro-kernel (:mod:`polytri.cpu_codegen.contraction`, which adds its conditions on loops,
domains and types); the scheduler keeps these statements in nests of their own (fusion policy
``outer``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .expr import Access, Binary, Expr, Var, accesses, var_names
from .indirect import has_indirect
from .program import Statement
from .reduction import statement_update


@dataclass(frozen=True)
class ContractionForm:
    """The roles in a statement of contraction form."""

    a: str
    """Iterator of the rows: a subscript of the target that ``R`` does not use."""
    summed: frozenset[str]
    """Iterators of ``L * R`` other than ``a``, ``b`` and those of the target's other subscripts (the sum
    runs over one of them; the others are fixed by enclosing loops)."""
    b: str
    """Iterator of the target's last subscript (columns of ``R``)."""
    left: Expr
    right: Expr
    op: str
    """``+`` or ``-``."""
    row_subscript: int
    """Position of ``a``'s subscript in the target."""


class _Roles:
    """Iterator roles in a statement's target subscripts."""

    def __init__(self, st: Statement, target: Access):
        self.iterators = set(st.iterators)
        self.target = target

    def plain(self, e: Expr) -> str | None:
        """The iterator ``e`` is, when it is a plain iterator of the statement."""
        return e.name if isinstance(e, Var) and e.kind == "iter" and e.name in self.iterators else None

    def row_candidates(self, it_b: str, right: Expr) -> list[int]:
        """Positions of the target's subscripts (the last excepted) that are plain iterators other than
        ``it_b`` and that ``right`` does not use."""
        uses_r = var_names(right, "iter")
        index = self.target.index
        return [p for p in range(len(index) - 1)
                if self.plain(index[p]) not in (None, it_b) and self.plain(index[p]) not in uses_r]


def _factors(term: Binary, roles: _Roles, it_b: str) -> tuple[Expr, Expr, list[int]] | None:
    """``(left, right, rows)``: the first order of ``term``'s factors where ``left`` does not use
    ``it_b`` and some subscript of the target can be the rows."""
    for left, right in ((term.lhs, term.rhs), (term.rhs, term.lhs)):
        if it_b in var_names(left, "iter"):
            continue
        rows = roles.row_candidates(it_b, right)
        if rows:
            return left, right, rows
    return None


def contraction_form(st: Statement) -> ContractionForm | None:
    """The contraction roles of ``st``, or ``None`` when it is not of that form."""
    target = st.target
    if not isinstance(target, Access) or len(target.index) < 2:
        return None
    if has_indirect(st.value):  # packing and tl.dot read operands at affine offsets only
        return None
    roles = _Roles(st, target)
    it_b = roles.plain(target.index[-1])
    update = statement_update(st)
    if it_b is None or update is None or update.op not in ("+", "-"):
        return None
    op, term = update.op, update.term
    if not (isinstance(term, Binary) and term.op == "*"):
        return None
    found = _factors(term, roles, it_b)
    if found is None:
        return None
    left, right, rows = found
    it_a = roles.plain(target.index[rows[-1]])
    assert it_a is not None
    others = [s for p, s in enumerate(target.index[:-1]) if p != rows[-1]]
    if any(var_names(s, "iter") & {it_a, it_b} for s in others):
        return None
    batch = set().union(*(var_names(s, "iter") for s in others))
    summed = frozenset(var_names(term, "iter") - {it_a, it_b} - batch)
    if not summed or any(acc.array == target.array for acc in accesses(term)):
        return None
    return ContractionForm(it_a, summed, it_b, left, right, op, rows[-1])
