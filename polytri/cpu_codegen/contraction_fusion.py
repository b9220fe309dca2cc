"""Statements folded into a packed contraction nest (:mod:`.contraction`): a zero init just before it, an
elementwise epilogue just after it, and the targets that only such an epilogue reads back.

Both are legality questions answered with isl on the statements' domains and accesses: the nest may
zero its target itself when the init zeroes exactly what it computes, and may run an epilogue on each
register block when the epilogue's instances are exactly the elements the nest writes.
"""

from __future__ import annotations

import math

import islpy as isl

from ..errors import NotAffineError
from ..ir.affine import const_value, to_isl
from ..ir.expr import Const, Expr, Var, accesses
from ..ir.program import Program, Statement
from .contraction_model import Contraction


def zero_init_fuses(init: Statement, c: Contraction, program: Program) -> bool:
    """Whether the statement ``init``, run just before the nest ``c`` and nowhere else, can be folded into
    it (:attr:`Contraction.zero_init`): it stores ``0`` into exactly the elements the nest computes (isl),
    and every sum has at least one term (constant, positive extents of ``k``), so the nest writes each of
    them even where it runs its fallback loops."""
    st = c.statement
    if c.columns is not None:
        return False  # a triangle: the fallback loops would zero each row's columns of the box, not of the triangle
    v = init.value.value if isinstance(init.value, Const) else None
    # +0 only: the registers start at +0, and -0 + -0 is -0 where +0 + -0 is +0
    if v is None or v != 0 or math.copysign(1.0, v) < 0 or init.target.array != st.target.array:
        return False
    for it in c.k:
        lo, hi = (const_value(e) for e in c.bounds[it])
        if lo is None or hi is None or hi <= lo:
            return False
    written = st.access_map(st.target, program.params).range()
    zeroed = init.access_map(init.target, program.params).range()
    return bool(written.is_equal(zeroed))


def epilogue_iterators(e: Statement, c: Contraction, program: Program) -> tuple[tuple[str, str], ...] | None:
    """Whether the statement ``e``, run just after the nest ``c`` and nowhere else, can run on each element
    of the target as soon as the nest completes its sum (:attr:`Contraction.epilogue`); if so, each of
    ``e``'s iterators and the target subscript's iterator it equals.  Conditions: ``e`` reads the target
    (at least once) and writes it only at one index whose subscripts are ``e``'s iterators, one each, in
    the places of the target's rows, columns and batch iterators (its constant subscripts equal); ``e``
    writes no array the nest reads and reads no other element of its own target; and its instances are
    exactly the elements of the nest's box, which the nest all writes (isl): every register block then
    runs ``e`` on all of its elements, and nothing else runs ``e``."""
    if c.fixed or c.columns is not None:
        return None  # a triangle computes part of its box: the checks below compare with the whole box
    tgt = c.statement.target
    at = _target_index(e, tgt.array)
    if at is None or not _apart_from_nest(e, c.statement):
        return None
    pairs = _subscript_pairs(tgt.index, at)
    if pairs is None or not _one_iterator_each(pairs, e, c):
        return None
    return tuple(pairs) if _runs_on_box(e, c, pairs, program) else None


def _target_index(e: Statement, array: str) -> tuple[Expr, ...] | None:
    """The one subscript tuple at which ``e`` reads (at least once) and maybe writes ``array``, or ``None``
    when it does not read ``array`` or accesses it at several indices."""
    mine = [a for a in (*accesses(e.value), e.target) if a.array == array]
    if not any(a.array == array for a in accesses(e.value)) or any(a.index != mine[0].index for a in mine):
        return None
    return mine[0].index


def _apart_from_nest(e: Statement, st: Statement) -> bool:
    """Whether ``e`` writes no array that the nest statement ``st`` reads (but its target) and, when it
    writes another array than the nest's target, reads no element of that array."""
    nest_reads = {a.array for a in accesses(st.value)}
    if e.target.array in nest_reads - {st.target.array}:
        return False
    return e.target.array == st.target.array or not any(a.array == e.target.array for a in accesses(e.value))


def _subscript_pairs(nest_index: tuple[Expr, ...], index: tuple[Expr, ...]) -> list[tuple[str, str]] | None:
    """For each subscript of the nest's target that is an iterator, the iterator of ``index`` at its place,
    as (``index``'s iterator, the nest's iterator); ``None`` when ``index`` has something else there or
    differs at a constant subscript."""
    pairs: list[tuple[str, str]] = []
    for s_sub, e_sub in zip(nest_index, index):
        if isinstance(s_sub, Var) and s_sub.kind == "iter":
            if not (isinstance(e_sub, Var) and e_sub.kind == "iter"):
                return None
            pairs.append((e_sub.name, s_sub.name))
        elif const_value(s_sub) is None or const_value(s_sub) != const_value(e_sub):
            return None
    return pairs


def _one_iterator_each(pairs: list[tuple[str, str]], e: Statement, c: Contraction) -> bool:
    """Whether the pairs match each iterator of ``e`` with a distinct one of the nest's rows, columns and
    batch iterators, all of them."""
    e_its, s_its = [a for a, _ in pairs], [b for _, b in pairs]
    return sorted(e_its) == sorted(e.iterators) and len(set(s_its)) == len(s_its) and set(s_its) == {
        c.a, c.b, *c.batch}


def _runs_on_box(e: Statement, c: Contraction, pairs: list[tuple[str, str]], program: Program) -> bool:
    """Whether the instances of ``e`` are exactly the target elements of the nest's box, and the nest
    writes each of them (isl); ``False`` when the box's bounds are not affine."""
    e_its, s_its = [a for a, _ in pairs], [b for _, b in pairs]
    st = c.statement
    params = ", ".join(program.params)
    coords = ", ".join(s_its)
    try:
        box = " and ".join(f"{to_isl(c.bounds[it][0], what='bound')} <= {it} < {to_isl(c.bounds[it][1], what='bound')}"
                           for it in s_its)
        box_set = isl.Set(f"[{params}] -> {{ [{coords}] : {box} }}")
    except (NotAffineError, isl.Error):
        return False
    to_elem = isl.Map(f"[{params}] -> {{ {e.name}[{', '.join(e.iterators)}] -> [{', '.join(e_its)}] }}")
    from_nest = isl.Map(f"[{params}] -> {{ {st.name}[{', '.join(st.iterators)}] -> [{coords}] }}")
    ctx = program.context
    runs_on = e.domain.apply(to_elem).intersect_params(ctx)
    written = st.domain.apply(from_nest).intersect_params(ctx)
    return bool(runs_on.is_equal(box_set.intersect_params(ctx)) and written.is_equal(runs_on))


def read_back_by_epilogues(program: Program, nests: tuple[Contraction, ...]) -> frozenset[str]:
    """Targets of contraction nests that no statement reads but the nest and its epilogue, which reads
    each block of the target in cache just after the nest stores it."""
    return frozenset(c.statement.target.array for c in nests if c.epilogue is not None
                     and program.readers(c.statement.target.array) <= {c.statement.name, c.epilogue.name})


__all__ = ["epilogue_iterators", "read_back_by_epilogues", "zero_init_fuses"]
