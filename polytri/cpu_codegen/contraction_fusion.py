"""Statements folded into a packed contraction nest (:mod:`.contraction`): a zero init just before it, an
elementwise epilogue just after it, and the targets that the nest then never stores.

The first two are legality questions answered with isl on the statements' domains and accesses: the
nest may zero its target itself when the init zeroes exactly what it computes, and may run an epilogue
on each register block when the epilogue's instances map one to one onto the elements the nest writes
(read directly, or through a view of the target: isl inverts the epilogue's subscripts).  The third is
a question of profit: the epilogue is folded in only where each block can be summed in a tile of its
own that the epilogue reads, so that the target is never stored (:func:`keeps_target_local`).
"""

from __future__ import annotations

import math

import islpy as isl

from ..errors import NotAffineError
from ..ir.affine import const_value, linear, to_isl
from ..ir.expr import Const, Expr, Var, accesses, substitute, var_names
from ..ir.program import Program, Statement, params_prefix
from ..schedule.loop_ast import isl_expr
from .contraction_model import Contraction
from .dot_product import dot_blocking


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


def epilogue_iterators(e: Statement, c: Contraction, program: Program) -> tuple[tuple[str, Expr], ...] | None:
    """Whether the statement ``e``, run just after the nest ``c`` and nowhere else, can run on each element
    of the target as soon as the nest completes its sum (:attr:`Contraction.epilogue`); if so, each of
    ``e``'s iterators as an expression of the iterators of the nest's target subscripts.  Conditions:
    ``e`` reads the target (at least once) and writes it only at one index, whose subscripts in the
    places of the target's rows, columns and batch iterators are affine in ``e``'s iterators (its constant
    subscripts equal); ``e`` writes no array the nest reads, reads no other element of its own target,
    and writes a distinct element at each instance; and the index maps its instances one to one onto the
    elements of the nest's box, which the nest all writes (isl): every register block then runs ``e`` on
    all of its elements, and nothing else runs ``e``.  Where those subscripts are ``e``'s iterators, one
    each, isl finds each iterator the nest's; read through a view (``C[128 * i0 + i1, j]`` in a statement
    over ``[i0, i1, j]``), a quasi-affine function of them (``i0 = r // 128, i1 = r % 128``)."""
    if c.fixed or c.columns is not None:
        return None  # a triangle computes part of its box: the checks below compare with the whole box
    tgt = c.statement.target
    at = _target_index(e, tgt.array)
    if at is None or not _apart_from_nest(e, c.statement) or not _writes_one_each(e, program):
        return None
    return _inverse_index(e, c, at, program)


def _writes_one_each(e: Statement, program: Program) -> bool:
    """Whether the instances of ``e`` write distinct elements (so that the order the register blocks run
    them in does not matter)."""
    try:
        return bool(program.access_map(e, e.target).is_injective())
    except (NotAffineError, isl.Error):
        return False


def _inverse_index(e: Statement, c: Contraction, at: tuple[Expr, ...],
                   program: Program) -> tuple[tuple[str, Expr], ...] | None:
    """:func:`epilogue_iterators` for ``e`` reading the target at affine subscripts ``at``: ``e``'s
    iterators as functions of the nest's (isl, on ``e``'s domain; the nest's iterators taken as
    parameters so that each function is one quasi-affine expression), where the index maps ``e``'s
    instances one to one onto the nest's box and the nest writes all of it."""
    st = c.statement
    nest: list[str] = []  # the nest's iterator at each iterator subscript of its target
    subs: list[str] = []  # e's subscript there, in isl
    try:
        for s_sub, e_sub in zip(st.target.index, at):
            if isinstance(s_sub, Var) and s_sub.kind == "iter":
                nest.append(s_sub.name)
                subs.append(to_isl(e_sub, what="epilogue subscript"))
            elif const_value(s_sub) is None or const_value(s_sub) != const_value(e_sub):
                return None
        if len(set(nest)) != len(nest) or set(nest) != {c.a, c.b, *c.batch}:
            return None
        coords = [f"pt_n{k}" for k in range(len(nest))]  # names of the nest's iterators apart from e's
        box = " and ".join(f"{to_isl(c.bounds[n][0], what='bound')} <= {x} < {to_isl(c.bounds[n][1], what='bound')}"
                           for n, x in zip(nest, coords))
        prefix = params_prefix(program.params)
        index = isl.Map(f"{prefix}{{ {e.name}[{', '.join(e.iterators)}] -> [{', '.join(subs)}] }}")
        box_set = isl.Set(f"{prefix}{{ [{', '.join(coords)}] : {box} }}").intersect_params(program.context)
        from_nest = isl.Map(f"{prefix}{{ {st.name}[{', '.join(st.iterators)}] -> [{', '.join(nest)}] }}")
        index = index.intersect_domain(e.domain)
        runs_on = index.range().intersect_params(program.context)
        written = st.domain.apply(from_nest).intersect_params(program.context)
        if not (index.is_injective() and runs_on.is_equal(box_set) and written.is_equal(runs_on)):
            return None
        # e's instance at each point of the box: the nest's iterators as parameters, e's iterators the set
        space = params_prefix((*program.params, *coords))
        on_box = isl.Set(f"{space}{{ : {box} }}").intersect_params(program.context)
        fixed = " and ".join(f"{x} = {s}" for x, s in zip(coords, subs))
        inst = isl.Set(f"{space}{{ {e.name}[{', '.join(e.iterators)}] : {fixed} }}")
        inst = inst.intersect(e.domain.align_params(inst.get_space())).intersect_params(on_box)
        values = inst.as_pw_multi_aff()  # one instance per point (the index is one to one): a function
        if values.n_piece() != 1 or not on_box.is_subset(values.domain()):
            return None
        build = isl.AstBuild.from_context(on_box)
        exprs = [isl_expr(build.expr_from_pw_aff(values.get_pw_aff(pos).gist(on_box)), program.params)
                 for pos in range(len(e.iterators))]
    except (NotAffineError, isl.Error):
        return None
    back = {x: Var(n, "iter") for x, n in zip(coords, nest)}
    out = tuple((it, substitute(x, back)) for it, x in zip(e.iterators, exprs))
    # the column runs in the epilogue's vector loop: divided there (a convolution's pixels put back in rows
    # of an image, p // 56), the epilogue's stores scatter, and the bfloat16 MobileNet of the zoo ran 9-14 %
    # slower than with that copy in a nest of its own
    return None if any(c.b in var_names(x, "iter") and linear(x) is None for _, x in out) else out


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


def keeps_target_local(c: Contraction, program: Program, scratch: frozenset[str]) -> bool:
    """Whether the nest ``c``, with its zero init and epilogue folded in, can sum each register block in a
    tile of its own and never store its target: the target is a temporary (``scratch``: no read sees a
    value from before the call, and its value after it does not matter), no statement but the nest and
    the epilogue reads it, and the sums take one block of ``k`` (constant extents, at most the panels'
    ``KC``), so that a block's sums are complete where the micro-kernel returns.  Only then is the
    epilogue folded in: where the product stores its target anyway, the epilogue run on each block (the
    target read back from the L1 cache) made the transformers of the model zoo up to 5 % slower than a nest
    of its own after the product (measured; docs/cpu.md), and with the tile 1-3.5 % faster."""
    if c.epilogue is None or not c.zero_init or c.statement.target.array not in scratch:
        return False
    if not program.readers(c.statement.target.array) <= {c.statement.name, c.epilogue.name}:
        return False
    n = 1
    for it in c.k:
        lo, hi = (const_value(e) for e in c.bounds[it])
        if lo is None or hi is None:
            return False
        n *= hi - lo
    return n <= dot_blocking(c.dtype, c.dot).kc


def kept_in_tiles(nests: tuple[Contraction, ...]) -> frozenset[str]:
    """Targets of contraction nests summed block by block in tiles that their epilogues read
    (:func:`keeps_target_local`): never stored."""
    return frozenset(c.statement.target.array for c in nests if c.epilogue is not None)


__all__ = ["epilogue_iterators", "keeps_target_local", "kept_in_tiles", "zero_init_fuses"]
