"""The statement form of a contraction (a gemm's update), shared by the scheduler and the C generator.

A statement is in contraction form when it reads

    T[..., a, b] = T[..., a, b] + L * R        (or ``-``; or ``L * R + T[...]``)

where ``a`` and ``b`` are distinct iterators and the last two subscripts of the target, no other
subscript of the target uses them, another iterator (the summed ``k``) appears in ``L * R``, ``L`` does not use ``b``
and ``R`` does not use ``a``, and neither reads ``T``'s array.  The C generator computes such a nest with
packed panels and a micro-kernel (:mod:`polytri.cpu_codegen.contraction`, which adds its conditions on
loops and types); the scheduler keeps these statements in nests of their own (fusion policy ``outer``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .expr import Access, Binary, Expr, Var, accesses, var_names
from .program import Statement


@dataclass(frozen=True)
class ContractionForm:
    """The roles in a statement of contraction form."""

    a: str
    """Iterator of the target's second-to-last subscript (rows of ``L``)."""
    summed: frozenset[str]
    """Iterators of ``L * R`` other than ``a``, ``b`` and those of the target's other subscripts (the sum
    runs over one of them; the others are fixed by enclosing loops)."""
    b: str
    """Iterator of the target's last subscript (columns of ``R``)."""
    left: Expr
    right: Expr
    op: str
    """``+`` or ``-``."""


def contraction_form(st: Statement) -> ContractionForm | None:
    """The contraction roles of ``st``, or ``None`` when it is not of that form."""
    target = st.target
    if not isinstance(target, Access) or len(target.index) < 2:
        return None
    sub_a, sub_b = target.index[-2], target.index[-1]
    its = set(st.iterators)
    if not (isinstance(sub_a, Var) and isinstance(sub_b, Var) and sub_a.kind == sub_b.kind == "iter"
            and sub_a.name in its and sub_b.name in its and sub_a.name != sub_b.name):
        return None
    it_a, it_b = sub_a.name, sub_b.name
    if any(var_names(s, "iter") & {it_a, it_b} for s in target.index[:-2]):
        return None
    value = st.value
    if isinstance(value, Binary) and value.op in ("+", "-") and value.lhs == target:
        op, term = value.op, value.rhs
    elif isinstance(value, Binary) and value.op == "+" and value.rhs == target:
        op, term = "+", value.lhs
    else:
        return None
    if not (isinstance(term, Binary) and term.op == "*"):
        return None
    left, right = term.lhs, term.rhs
    if it_b in var_names(left, "iter") or it_a in var_names(right, "iter"):
        left, right = right, left
    if it_b in var_names(left, "iter") or it_a in var_names(right, "iter"):
        return None
    batch = set().union(*(var_names(s, "iter") for s in target.index[:-2]))
    summed = frozenset(var_names(term, "iter") - {it_a, it_b} - batch)
    if not summed or any(acc.array == target.array for acc in accesses(term)):
        return None
    return ContractionForm(it_a, summed, it_b, left, right, op)
