"""Gemm-like contractions on the CPU: packed panels and a register-blocked micro-kernel, as generated C.

A *contraction nest* computes a statement of contraction form (:mod:`polytri.ir.contraction`)

    T[..., a, ..., b] = T[..., a, ..., b] + L * R        (or ``-``; or ``L * R + T[...]``)

where the target, ``L``, ``R`` and the sum all have one type, float32 or float64 (or int32, for sums of
8-bit stored values on a machine with integer dot-product instructions: :mod:`.dot_product`).  It is
found in two ways: three perfectly nested loops with rectangular bounds, one per role (:func:`find_contraction`), or a
whole nest of its own computing every instance of the statement, read from its iteration domain
(:func:`find_domain_contraction`: several summed iterators, batch loops, padding as a guard).  The only
dependences among its instances are those of the sum over ``k`` for each target element, so any order
that keeps every sum's ``k`` ascending (lexicographically) computes the same values bit for bit
(``-ffp-contract=off``: no fused multiply-add here or in the loops it replaces); bfloat16 products summed
on AMX tiles are the one exception (:mod:`.tiles`).

The nest is computed the way BLIS computes a gemm: blocks of ``KC`` values of ``k`` by ``NC`` columns of
``R`` are packed into a contiguous buffer, ``MR`` rows of ``L`` into another, and a micro-kernel keeps an
``MR x NR`` block of the target in registers while it runs over the ``KC`` values of ``k``.  Packing
makes every access of the micro-kernel contiguous whatever the layout of ``L`` and ``R`` (a transposed
operand, an expression such as ``alpha * A[i, k]``, a convolution's shifted image); ragged edges are
zero-padded in the panels and computed through a small tile, so only valid elements of the target are
read or written.  Threads share the batch points, or else the rows of the target, or its columns when
``R`` is a matrix read once and that makes a thread pack fewer elements (a small batch through a linear
layer); each packs its own panels.  An elementwise statement on the target just after the nest can run on
each register block as its sums complete (:func:`epilogue_iterators`).

This module finds the nests; the others of the packed contraction are :mod:`.blocking` (the machine model:
vector width, block sizes), :mod:`.contraction_model` (the :class:`Contraction` record),
:mod:`.contraction_fusion` (a zero init and an epilogue folded into the nest), :mod:`.packing` (the C of
the nest: panels, micro-kernel calls, fallback loops) and :mod:`.microkernel` (the micro-kernel's C).  Their
public names are importable from here too.
"""

from __future__ import annotations

import islpy as isl

from ..dtypes import FLOAT32, FLOAT64, INT32, DType
from ..ir.affine import condition_to_isl, to_isl
from ..ir.contraction import ContractionForm, contraction_form
from ..ir.expr import Binary, Const, Expr, Var, accesses, conjunction, var_names
from ..ir.program import Program, Statement, params_prefix
from ..ir.types import Typer
from ..schedule.loop_ast import Block, For, Node, Run, isl_expr, loop_upper
from .blocking import WHOLE_L_BYTES, Blocking, blocking, vector_bytes
from .contraction_fusion import epilogue_iterators, kept_in_tiles, zero_init_fuses
from .contraction_model import Contraction, describe
from .dot_product import integer_dot
from .microkernel import micro_kernel
from .packing import contraction_lines
from .row_columns import row_columns

Bounds = dict[str, tuple[Expr, Expr]]
"""``[lower, upper)`` of iterators, by name."""


# -- three loops ---------------------------------------------------------------------------------------
def _chain(n: For) -> tuple[list[For], Run] | None:
    """Three perfectly nested loops from ``n`` down to one statement, or ``None``."""
    loops = [n]
    body: Node = n.body
    while True:
        while isinstance(body, Block) and len(body.body) == 1:
            body = body.body[0]
        if isinstance(body, For) and len(loops) < 3:
            loops.append(body)
            body = body.body
            continue
        break
    if len(loops) != 3 or not isinstance(body, Run):
        return None
    return loops, body


def _loop_box(loops: list[For]) -> Bounds | None:
    """``[lower, upper)`` of each loop, by counter, when every loop has step 1 and bounds free of the other
    loops' counters (a box), else ``None``."""
    counters = {lp.var for lp in loops}
    box: Bounds = {}
    for lp in loops:
        upper = loop_upper(lp)
        if lp.step != 1 or upper is None:
            return None
        if (var_names(lp.lower, "iter") | var_names(lp.cond, "iter")) & (counters - {lp.var}):
            return None  # a triangle: not a box
        box[lp.var] = (lp.lower, upper)
    return box


def _counter_iterators(st: Statement, args: tuple[Expr, ...], counters: set[str]
                       ) -> tuple[dict[str, str], dict[str, Expr]] | None:
    """The iterators of ``st`` (run with ``args``) that are plainly one of the ``counters``, by counter,
    and the others, fixed by enclosing loops; ``None`` when one mixes a counter into an expression (a
    skewed nest)."""
    by_counter: dict[str, str] = {}
    fixed: dict[str, Expr] = {}
    for it, arg in zip(st.iterators, args):
        if isinstance(arg, Var) and arg.kind == "iter" and arg.name in counters:
            by_counter[arg.name] = it
        elif var_names(arg, "iter") & counters:
            return None  # an iterator that is not plainly one counter (a skewed nest)
        else:
            fixed[it] = arg
    return by_counter, fixed


def _typed_form(st: Statement, typer: Typer) -> tuple[ContractionForm, DType] | None:
    """The contraction form of ``st`` when the target, both factors and the sum have one float type, or
    are int32 sums of 8-bit stored values that this machine's dot-product instructions sum
    (:func:`.dot_product.integer_dot`)."""
    form = contraction_form(st)
    if form is None:
        return None
    d = typer(st.target).dtype
    value = st.value
    assert isinstance(value, Binary)
    if (d not in (FLOAT32, FLOAT64) and not (d is INT32 and integer_dot(form.left, form.right, typer))) or any(
            typer(e).dtype is not d for e in (value, value.lhs, value.rhs, form.left, form.right)):
        return None
    return form, d


def _summed_loop(form: ContractionForm, iterators: set[str]) -> str | None:
    """The one of the three loops' ``iterators`` that is summed, the others being the rows and the columns,
    or ``None``."""
    if form.a not in iterators or form.b not in iterators:
        return None
    it_k = next(it for it in iterators if it not in (form.a, form.b))
    return it_k if it_k in form.summed else None


def find_contraction(n: For, program: Program, typer: Typer) -> Contraction | None:
    """The contraction nest of three loops rooted at ``n`` (one loop each for the rows, the columns and
    the sum, in any order, with rectangular bounds), or ``None``."""
    found = _chain(n)
    if found is None:
        return None
    loops, run = found
    box = _loop_box(loops)
    if box is None:
        return None
    st = program.statement(run.statement)
    split = _counter_iterators(st, run.args, set(box))
    if split is None or len(split[0]) != 3:
        return None
    by_counter, fixed = split
    names = {v: k for k, v in by_counter.items()}  # iterator -> counter
    typed = _typed_form(st, typer)
    it_k = None if typed is None else _summed_loop(typed[0], set(names))
    if typed is None or it_k is None:
        return None
    form, d = typed
    return Contraction(st, form.a, form.b, (it_k,), (), {it: box[c] for it, c in names.items()}, fixed,
                       guard=None, batch_guard=None, padded=False, pack_l_once=False, left=form.left,
                       right=form.right, op=form.op, dtype=d, row_subscript=form.row_subscript)


# -- a whole nest, from the statement's domain ---------------------------------------------------------
def _constraint(c: isl.Constraint, params: set[str]) -> tuple[Expr, set[str]]:
    """An isl constraint as a condition and the iterators it involves."""
    terms: list[Expr] = []
    used: set[str] = set()
    for kind in (isl.dim_type.param, isl.dim_type.set):
        for i in range(c.get_space().dim(kind)):
            v = c.get_coefficient_val(kind, i).to_python()
            if v:
                name = str(c.get_space().get_dim_name(kind, i))
                if kind == isl.dim_type.set:
                    used.add(name)
                term: Expr = Var(name, "param" if name in params else "iter")
                terms.append(term if v == 1 else Binary("*", Const(v), term))
    const = c.get_constant_val().to_python()
    e: Expr = terms[0] if terms else Const(const)
    for t in terms[1:]:
        e = Binary("+", e, t)
    if terms and const:
        e = Binary("+", e, Const(const))
    return Binary("==" if c.is_equality() else ">=", e, Const(0)), used


def _batch_iterators(st: Statement, form: ContractionForm) -> tuple[str, ...] | None:
    """The iterators of ``st`` other than the rows, the columns and the sums, when each is a plain subscript
    of the target, else ``None``."""
    batch = tuple(it for it in st.iterators if it not in form.summed and it not in (form.a, form.b))
    plain = {s.name for s in st.target.index if isinstance(s, Var) and s.kind == "iter"}
    return batch if set(batch) <= plain else None


def _one_basic_set(dom: isl.Set) -> isl.BasicSet | None:
    """The one convex piece of ``dom`` when it has no existential variables, else ``None``."""
    if dom.n_basic_set() != 1:
        return None
    bset = dom.get_basic_sets()[0]
    return None if bset.dim(isl.dim_type.div) else bset


Constraints = list[tuple[isl.Constraint, Expr, set[str]]]
"""Constraints of a domain, each with its condition and the iterators it involves (:func:`_constraint`)."""


def _sorted_constraints(constraints: Constraints, a: str, b: str, batch: tuple[str, ...]
                        ) -> tuple[list[Expr], list[tuple[Expr, isl.Constraint]], list[Expr], list[Expr]] | None:
    """The conditions on the rows ``a`` alone, the others on more than the ``batch`` iterators (with their
    constraints), those on ``batch`` alone, and those on the rows and the columns ``b`` together (a
    triangle: :mod:`.row_columns`); ``None`` when a constraint on ``a`` involves another iterator."""
    rows: list[Expr] = []
    kept: list[tuple[Expr, isl.Constraint]] = []
    on_batch: list[Expr] = []
    triangle: list[Expr] = []
    for c, cond, used in constraints:
        if used == {a, b}:
            triangle.append(cond)
        elif a in used:
            if used != {a}:
                return None  # rows that depend on another iterator: not a box of rows
            rows.append(cond)
        elif used <= set(batch):
            on_batch.append(cond)
        else:
            kept.append((cond, c))
    return rows, kept, on_batch, triangle


def _domain_bounds(st: Statement, program: Program, bset: isl.BasicSet, dom: isl.Set,
                   constraints: Constraints, whole: tuple[str, ...] = ()) -> Bounds | None:
    """``[lower, upper)`` of each iterator of ``st``: from the constraints on that iterator alone where they
    bound it (a convolution's ``0 <= kh < 3``, not the ``0 <= oh + kh - 1`` that would make it piecewise
    in the image's height), else, and for the iterators ``whole``, from ``dom``; ``None`` when a bound is
    piecewise."""
    alone = isl.BasicSet.universe(bset.get_space())
    for c, _, used in constraints:
        if len(used) <= 1:
            alone = alone.add_constraint(c)
    alone_set = alone.to_set().intersect_params(program.context)
    build = isl.AstBuild.from_context(program.context)
    bounds: Bounds = {}
    for pos, it in enumerate(st.iterators):
        src = alone_set if it not in whole and alone_set.dim_is_bounded(isl.dim_type.set, pos) else dom
        lo, hi = src.dim_min(pos), src.dim_max(pos)
        if lo.n_piece() != 1 or hi.n_piece() != 1:
            return None
        bounds[it] = (isl_expr(build.expr_from_pw_aff(lo), program.params),
                      Binary("+", isl_expr(build.expr_from_pw_aff(hi), program.params), Const(1)))
    return bounds


class _Boxes:
    """Sets of instances of ``st`` (isl) restricted by conditions and by :func:`_domain_bounds`'s bounds."""

    def __init__(self, st: Statement, program: Program, bounds: Bounds):
        self.program = program
        self.bounds = bounds
        self.what = f"{st.name}: contraction box"
        self.prefix = f"{params_prefix(program.params)}{{ {st.name}[{', '.join(st.iterators)}]"

    def box(self, conds: list[Expr], boxed: tuple[str, ...]) -> isl.Set:
        """The instances' space restricted by ``conds`` and the bounds of the iterators ``boxed``."""
        what, bounds = self.what, self.bounds
        text = [condition_to_isl(c, what=what) for c in conds]
        text += [f"{to_isl(bounds[it][0], what=what, allow_minmax=True)} <= {it} < "
                 f"{to_isl(bounds[it][1], what=what, allow_minmax=True)}" for it in boxed]
        return isl.Set(f"{self.prefix} : {' and '.join(text)} }}").intersect_params(self.program.context)

    def in_bounds(self, e: Expr, instances: isl.Set) -> bool:
        """Whether every array element that ``e`` reads at ``instances`` is within its array."""
        program, what = self.program, self.what
        return all(
            isl.Map(f"{self.prefix} -> {acc.array}[{', '.join(to_isl(x, what=what) for x in acc.index)}] }}")
            .intersect_domain(instances).range().is_subset(program.array(acc.array).extent_isl(program.params))
            for acc in accesses(e))


def _writes_whole_box(st: Statement, full: isl.Set, dom: isl.Set, k: tuple[str, ...]) -> bool:
    """Whether every target element of the box ``full`` is written by some instance of ``dom``: both
    without the summed iterators ``k``."""

    def project(s: isl.Set) -> isl.Set:
        for it in reversed(k):
            s = s.project_out(isl.dim_type.set, st.iterators.index(it), 1)
        return s
    return bool(project(full).is_subset(project(dom)))


def _guard(full: isl.Set, kept: list[tuple[Expr, isl.Constraint]]) -> list[Expr]:
    """The conditions of ``kept`` that the box ``full`` does not imply already."""
    return [cond for cond, c in kept
            if not full.is_subset(isl.BasicSet.universe(c.get_space()).add_constraint(c).to_set())]


def find_domain_contraction(st: Statement, program: Program, typer: Typer) -> Contraction | None:
    """The contraction computed by a nest of its own that runs every instance of ``st`` (the caller checks
    that), from the statement's iteration domain rather than from the nest's loops, or ``None``.

    The iterators of ``st`` must be its rows ``a``, its columns ``b``, summed iterators ``k`` and iterators
    ``batch`` that are the target's other subscripts, plainly.  The domain must be one convex set
    without existential variables whose constraints on ``a`` involve no other iterator, and every
    ``(batch, a, b)`` of its bounding box that satisfies the constraints on ``batch`` alone must be an
    instance for some ``k``.  The other constraints (a convolution's padding: ``0 <= oh + kh - 1 < H``)
    become the panels' guard; the zeros they leave in the panels are summed too, which needs ``L``
    finite and in bounds on the whole box (checked at run time and here)."""
    typed = _typed_form(st, typer)
    batch = None if typed is None else _batch_iterators(st, typed[0])
    if typed is None or batch is None:
        return None  # an iterator outside the target's plain subscripts and the sum
    form, d = typed
    k = tuple(it for it in st.iterators if it in form.summed)
    dom = st.domain.coalesce()
    bset = _one_basic_set(dom)
    if bset is None:
        return None
    params = set(program.params)
    constraints = [(c, *_constraint(c, params)) for c in bset.get_constraints()]
    sorted_ = _sorted_constraints(constraints, form.a, form.b, batch)
    # a triangle's rows: those with columns (the strict lower triangle has none in its first row)
    bounds = None if sorted_ is None else _domain_bounds(st, program, bset, dom, constraints,
                                                         (form.a,) if sorted_[3] else ())
    if sorted_ is None or bounds is None:
        return None
    rows, kept, on_batch, triangle = sorted_
    boxes = _Boxes(st, program, bounds)
    full = boxes.box(rows + on_batch + triangle, (form.b, *k))
    dom = dom.intersect_params(program.context)
    if not _writes_whole_box(st, full, dom, k):
        return None  # some target element of the box is never written
    padded = not full.is_subset(dom)
    guard = _guard(full, kept)
    columns = None
    if triangle:
        columns = _triangle_columns(st, program, form, bounds, boxes, rows, triangle, batch, padded)
        if columns is None:
            return None
    # L is read on its box of rows and sums, whatever the batch points: by the finiteness check and
    # when its panels are packed once for all batch points
    by_batch = bool(var_names(form.left, "iter") & set(batch))
    l_in_bounds = boxes.in_bounds(form.left, boxes.box(rows, tuple(it for it in st.iterators if it != form.a)))
    if padded and (by_batch or not l_in_bounds):
        return None  # the finiteness check scans L over its rows and sums only, which must be in bounds
    return Contraction(st, form.a, form.b, k, batch, bounds, {},
                       guard=conjunction(guard) if padded else None,
                       batch_guard=conjunction(on_batch), padded=padded,
                       pack_l_once=bool(batch) and not by_batch and l_in_bounds, left=form.left, right=form.right,
                       op=form.op, dtype=d, row_subscript=form.row_subscript, columns=columns)


def _triangle_columns(st: Statement, program: Program, form: ContractionForm, bounds: Bounds, boxes: _Boxes,
                      rows: list[Expr], triangle: list[Expr], batch: tuple[str, ...], padded: bool
                      ) -> tuple[Expr, Expr] | None:
    """The columns of each row (:func:`.row_columns.row_columns`) of a contraction whose domain bounds its
    columns by its rows, or ``None``: not with batch iterators or zero-padded panels, and only where ``L``
    on the rows and sums, ``R`` on the columns' range and sums, and the target on the rows by the columns'
    range are in bounds (the panels are packed, and a block across the triangle's edge is read, whole)."""
    a, b = form.a, form.b
    sums = tuple(it for it in st.iterators if it not in (a, b))
    if batch or padded or not (boxes.in_bounds(form.left, boxes.box(rows, sums))
                               and boxes.in_bounds(form.right, boxes.box([], (b, *sums)))
                               and boxes.in_bounds(st.target, boxes.box(rows, (b,)))):
        return None
    within: list[Expr] = [Binary(">=", Var(a, "iter"), bounds[a][0]), Binary("<", Var(a, "iter"), bounds[a][1])]
    return row_columns(st, program, a, b, bounds[b], rows + within, triangle)


__all__ = ["WHOLE_L_BYTES", "Blocking", "Contraction", "blocking", "contraction_lines", "describe",
           "epilogue_iterators", "find_contraction", "find_domain_contraction", "micro_kernel",
           "kept_in_tiles", "vector_bytes", "zero_init_fuses"]
