"""Gemm-like contractions on the CPU: packed panels and a register-blocked micro-kernel, as generated C.

A *contraction nest* computes a statement of contraction form (:mod:`polytri.ir.contraction`)

    T[..., a, ..., b] = T[..., a, ..., b] + L * R        (or ``-``; or ``L * R + T[...]``)

where the target, ``L``, ``R`` and the sum all have one type, float32 or float64.  It is found in two
ways: three perfectly nested loops with rectangular bounds, one per role (:func:`find_contraction`), or a
whole nest of its own computing every instance of the statement, read from its iteration domain
(:func:`find_domain_contraction`: several summed iterators, batch loops, padding as a guard).  The only
dependences among its instances are those of the sum over ``k`` for each target element, so any order
that keeps every sum's ``k`` ascending (lexicographically) computes the same values bit for bit
(``-ffp-contract=off``: no fused multiply-add here or in the loops it replaces).

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
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import islpy as isl

from ..dtypes import FLOAT32, FLOAT64, DType
from ..errors import NotAffineError
from ..ir.affine import condition_to_isl, const_value, to_isl
from ..ir.contraction import ContractionForm, contraction_form
from ..ir.expr import Access, Binary, Const, Expr, Var, accesses, var_names
from ..ir.program import Program, Statement, params_prefix
from ..ir.types import Typer
from ..schedule.loop_ast import Block, For, Node, Run, isl_expr, loop_upper
from .cexpr import comment, index_expr

log = logging.getLogger("polytri.cpu")


@functools.cache
def vector_bytes() -> int:
    """Width of the widest vector registers of this machine (the code is built with -march=native)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        flags = []
    if "avx512f" in flags:
        return 64
    return 32 if "avx2" in flags or "avx" in flags else 16


@dataclass(frozen=True)
class Blocking:
    """Block sizes of the packed contraction, in elements."""

    mr: int
    """Rows of the register block."""
    nr: int
    """Columns of the register block (whole vectors)."""
    kc: int
    """Values of ``k`` per packed block (a ``KC x NR`` panel of ``R`` stays in L1)."""
    nc: int
    """Columns per packed block of ``R`` (``KC x NC`` elements: half of a 1 MiB L2)."""


#: Largest packed copy of a whole ``L`` that a nest with batch loops keeps (half of the 1 MiB L2).
WHOLE_L_BYTES = 512 << 10


def blocking(d: DType) -> Blocking:
    """The register block fills the vector registers: with AVX-512's 32 registers, 4 rows of 4 vectors
    (16 accumulators; a hand-written float32 gemm 1024³ ran at 155 GFLOP/s with it against 138 with 8 x 2,
    one quiet run here); with 16 registers, 6 rows of 2 vectors (12 accumulators, the shape BLIS uses on
    Haswell; no such machine was measured)."""
    lanes = vector_bytes() // d.itemsize
    mr, nr = (4, 4 * lanes) if vector_bytes() == 64 else (6, 2 * lanes)
    kc = 256
    return Blocking(mr, nr, kc, (512 << 10) // (kc * d.itemsize))


@dataclass(frozen=True)
class Contraction:
    """A contraction nest: one statement of contraction form and the instances the packed code computes."""

    statement: Statement
    a: str
    """Iterator of the target's rows."""
    b: str
    """Iterator of the target's columns (its last subscript)."""
    k: tuple[str, ...]
    """The summed iterators, in the statement's order: the sum runs over them lexicographically."""
    batch: tuple[str, ...]
    """Other iterators that the packed code loops over itself (a whole-domain nest); the enclosing loops
    fix the rest (:attr:`fixed`)."""
    bounds: dict[str, tuple[Expr, Expr]]
    """``[lower, upper)`` of ``a``, ``b``, each of ``k`` and each of ``batch``: expressions in the
    parameters and the counters of enclosing loops."""
    fixed: dict[str, Expr]
    """The statement's other iterators, as expressions of the enclosing loops' counters."""
    guard: Expr | None
    """Condition on ``batch``, ``k`` and ``b`` for a point of the bounds' box to be an instance (``None``:
    every point is; the rows ``a`` never need one)."""
    batch_guard: Expr | None
    """Condition on ``batch`` alone."""
    padded: bool
    """Some points of the box are not instances: the panels hold zeros there, whose products with ``L``
    are added too, which is exact only while ``L`` is finite (checked at run time)."""
    pack_l_once: bool
    """``L`` does not depend on the batch iterators and is in bounds on its whole box of rows and sums:
    its panels may be packed once for every batch point."""
    left: Expr
    """The factor of ``(a, k)``, in the statement's iterators."""
    right: Expr
    """The factor of ``(k, b)``, in the statement's iterators."""
    op: str
    """``+`` or ``-``."""
    dtype: DType
    """float32 or float64."""
    row_subscript: int
    """Position of ``a``'s subscript in the target (the rows' stride is the product of later extents)."""
    zero_init: bool = False
    """The nest also sets every element it computes to zero before its sum (an init statement folded in,
    see :func:`zero_init_fuses`): the first block of ``k`` starts its registers at zero instead of
    loading the target."""
    epilogue: Statement | None = None
    """A statement run on each element as soon as its sum is complete, on each register block while it
    is in cache (a bias, an activation: see :func:`epilogue_iterators`), instead of in a nest of its own
    that reads the whole target again."""
    epilogue_at: tuple[tuple[str, str], ...] = ()
    """Each iterator of :attr:`epilogue` and the iterator of the nest's target subscript it equals."""


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


def _typed_form(st: Statement, typer: Typer) -> tuple[ContractionForm, DType] | None:
    """The contraction form of ``st`` when the target, both factors and the sum have one float type."""
    form = contraction_form(st)
    if form is None:
        return None
    d = typer(st.target).dtype
    value = st.value
    assert isinstance(value, Binary)
    if d not in (FLOAT32, FLOAT64) or any(typer(e).dtype is not d for e in (value, value.lhs, value.rhs,
                                                                            form.left, form.right)):
        return None
    return form, d


def find_contraction(n: For, program: Program, typer: Typer) -> Contraction | None:
    """The contraction nest of three loops rooted at ``n`` (one loop each for the rows, the columns and
    the sum, in any order, with rectangular bounds), or ``None``."""
    found = _chain(n)
    if found is None:
        return None
    loops, run = found
    counters = {lp.var for lp in loops}
    for lp in loops:
        if lp.step != 1 or loop_upper(lp) is None:
            return None
        if (var_names(lp.lower, "iter") | var_names(lp.cond, "iter")) & (counters - {lp.var}):
            return None  # a triangle: not a box
    st = program.statement(run.statement)
    by_counter: dict[str, str] = {}
    fixed: dict[str, Expr] = {}
    for it, arg in zip(st.iterators, run.args):
        if isinstance(arg, Var) and arg.kind == "iter" and arg.name in counters:
            by_counter[arg.name] = it
        elif var_names(arg, "iter") & counters:
            return None  # an iterator that is not plainly one counter (a skewed nest)
        else:
            fixed[it] = arg
    if len(by_counter) != 3:
        return None
    typed = _typed_form(st, typer)
    names = {v: k for k, v in by_counter.items()}  # iterator -> counter
    if typed is None or typed[0].a not in names or typed[0].b not in names:
        return None
    form, d = typed
    it_k = next(it for it in names if it not in (form.a, form.b))
    if it_k not in form.summed:
        return None
    by_var = {lp.var: lp for lp in loops}
    bounds = {it: (by_var[c].lower, loop_upper(by_var[c])) for it, c in names.items()}
    return Contraction(st, form.a, form.b, (it_k,), (), bounds, fixed, None, None, False, False,  # type: ignore[arg-type]
                       form.left, form.right, form.op, d, form.row_subscript)


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


def _conjunction(conds: list[Expr]) -> Expr | None:
    out = conds[0] if conds else None
    for c in conds[1:]:
        out = Binary("and", out, c)  # type: ignore[arg-type]
    return out


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
    if typed is None:
        return None
    form, d = typed
    target = st.target
    batch = tuple(it for it in st.iterators if it not in form.summed and it not in (form.a, form.b))
    plain = {s.name for s in target.index if isinstance(s, Var) and s.kind == "iter"}
    if not set(batch) <= plain:
        return None  # an iterator outside the target's plain subscripts and the sum
    k = tuple(it for it in st.iterators if it in form.summed)
    dom = st.domain.coalesce()
    if dom.n_basic_set() != 1:
        return None
    bset = dom.get_basic_sets()[0]
    if bset.dim(isl.dim_type.div):
        return None
    params = set(program.params)
    constraints = [(c, *_constraint(c, params)) for c in bset.get_constraints()]
    rows, kept, on_batch = [], [], []
    for c, cond, used in constraints:
        if form.a in used:
            if used != {form.a}:
                return None  # rows that depend on another iterator: not a box of rows
            rows.append(cond)
        elif used <= set(batch):
            on_batch.append(cond)
        else:
            kept.append((cond, c))
    # the box: the bounds of each iterator alone (a convolution's 0 <= kh < 3, not the 0 <= oh + kh - 1
    # that would make it piecewise in the image's height)
    alone = isl.BasicSet.universe(bset.get_space())
    for c, _, used in constraints:
        if len(used) <= 1:
            alone = alone.add_constraint(c)
    alone_set = alone.to_set().intersect_params(program.context)
    build = isl.AstBuild.from_context(program.context)
    bounds: dict[str, tuple[Expr, Expr]] = {}
    for pos, it in enumerate(st.iterators):
        src = alone_set if alone_set.dim_is_bounded(isl.dim_type.set, pos) else dom
        lo, hi = src.dim_min(pos), src.dim_max(pos)
        if lo.n_piece() != 1 or hi.n_piece() != 1:
            return None
        bounds[it] = (isl_expr(build.expr_from_pw_aff(lo), program.params),
                      Binary("+", isl_expr(build.expr_from_pw_aff(hi), program.params), Const(1)))
    what = f"{st.name}: contraction box"
    prefix = f"{params_prefix(program.params)}{{ {st.name}[{', '.join(st.iterators)}]"

    def box(conds: list[Expr], boxed: tuple[str, ...]) -> isl.Set:
        """The instances' space restricted by ``conds`` and the bounds of the iterators ``boxed``."""
        text = [condition_to_isl(c, what=what) for c in conds]
        text += [f"{to_isl(bounds[it][0], what=what, allow_minmax=True)} <= {it} < "
                 f"{to_isl(bounds[it][1], what=what, allow_minmax=True)}" for it in boxed]
        return isl.Set(f"{prefix} : {' and '.join(text)} }}").intersect_params(program.context)

    full = box(rows + on_batch, (form.b, *k))
    dom = dom.intersect_params(program.context)

    def project(s: isl.Set) -> isl.Set:
        for it in reversed(k):
            s = s.project_out(isl.dim_type.set, st.iterators.index(it), 1)
        return s
    if not project(full).is_subset(project(dom)):
        return None  # some target element of the box is never written
    padded = not full.is_subset(dom)
    # the guard: the constraints that the box does not imply already
    guard = [cond for cond, c in kept
             if not full.is_subset(isl.BasicSet.universe(c.get_space()).add_constraint(c).to_set())]
    # L is read on its box of rows and sums, whatever the batch points: by the finiteness check and
    # when its panels are packed once for all batch points
    by_batch = bool(var_names(form.left, "iter") & set(batch))
    lset = box(rows, tuple(it for it in st.iterators if it != form.a))
    l_in_bounds = all(
        isl.Map(f"{prefix} -> {acc.array}[{', '.join(to_isl(e, what=what) for e in acc.index)}] }}")
        .intersect_domain(lset).range().is_subset(program.array(acc.array).extent_isl(program.params))
        for acc in accesses(form.left))
    if padded and (by_batch or not l_in_bounds):
        return None  # the finiteness check scans L over its rows and sums only, which must be in bounds
    return Contraction(st, form.a, form.b, k, batch, bounds, {}, _conjunction(guard) if padded else None,
                       _conjunction(on_batch), padded, bool(batch) and not by_batch and l_in_bounds,
                       form.left, form.right, form.op, d, form.row_subscript)


def zero_init_fuses(init: Statement, c: Contraction, program: Program) -> bool:
    """Whether the statement ``init``, run just before the nest ``c`` and nowhere else, can be folded into
    it (:attr:`Contraction.zero_init`): it stores ``0`` into exactly the elements the nest computes (isl),
    and every sum has at least one term (constant, positive extents of ``k``), so the nest writes each of
    them even where it runs its fallback loops."""
    st = c.statement
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
    st = c.statement
    tgt = st.target
    if c.fixed:
        return None
    mine = [a for a in (*accesses(e.value), e.target) if a.array == tgt.array]
    if not any(a.array == tgt.array for a in accesses(e.value)) or any(a.index != mine[0].index for a in mine):
        return None
    nest_reads = {a.array for a in accesses(st.value)}
    if e.target.array in nest_reads - {tgt.array}:
        return None
    if e.target.array != tgt.array and any(a.array == e.target.array for a in accesses(e.value)):
        return None
    pairs: list[tuple[str, str]] = []
    for s_sub, e_sub in zip(tgt.index, mine[0].index):
        if isinstance(s_sub, Var) and s_sub.kind == "iter":
            if not (isinstance(e_sub, Var) and e_sub.kind == "iter"):
                return None
            pairs.append((e_sub.name, s_sub.name))
        elif const_value(s_sub) is None or const_value(s_sub) != const_value(e_sub):
            return None
    e_its, s_its = [a for a, _ in pairs], [b for _, b in pairs]
    if sorted(e_its) != sorted(e.iterators) or len(set(s_its)) != len(s_its) or set(s_its) != {c.a, c.b, *c.batch}:
        return None
    params = ", ".join(program.params)
    coords = ", ".join(s_its)
    try:
        box = " and ".join(f"{to_isl(c.bounds[it][0], what='bound')} <= {it} < {to_isl(c.bounds[it][1], what='bound')}"
                           for it in s_its)
        box_set = isl.Set(f"[{params}] -> {{ [{coords}] : {box} }}")
    except (NotAffineError, isl.Error):
        return None
    to_elem = isl.Map(f"[{params}] -> {{ {e.name}[{', '.join(e.iterators)}] -> [{', '.join(e_its)}] }}")
    from_nest = isl.Map(f"[{params}] -> {{ {st.name}[{', '.join(st.iterators)}] -> [{coords}] }}")
    ctx = program.context
    runs_on = e.domain.apply(to_elem).intersect_params(ctx)
    written = st.domain.apply(from_nest).intersect_params(ctx)
    if not (runs_on.is_equal(box_set.intersect_params(ctx)) and written.is_equal(runs_on)):
        return None
    return tuple(pairs)


def read_back_by_epilogues(program: Program, nests: tuple[Contraction, ...]) -> frozenset[str]:
    """Targets of contraction nests that no statement reads but the nest and its epilogue, which reads
    each block of the target in cache just after the nest stores it."""
    return frozenset(c.statement.target.array for c in nests if c.epilogue is not None
                     and program.readers(c.statement.target.array) <= {c.statement.name, c.epilogue.name})


def describe(c: Contraction) -> str:
    """One line for a kernel's decisions."""
    b = blocking(c.dtype)
    batch = f", looping over {', '.join(c.batch)}" if c.batch else ""
    pad = ", zero-padded panels" if c.padded else ""
    init = ", its zero init folded in" if c.zero_init else ""
    epi = f", {c.epilogue.name} run on each block as its sums complete" if c.epilogue is not None else ""
    return (f"contraction {c.statement.name} (rows {c.a}, columns {c.b}, sum over {', '.join(c.k)}{batch}, "
            f"{c.dtype.name}): packed {b.kc} x {b.nc} and {b.mr} x {b.kc} panels, {b.mr} x {b.nr} register-"
            f"blocked micro-kernel{pad}{init}{epi}")


# -- C -------------------------------------------------------------------------------------------------
def micro_kernel(d: DType, op: str, simd: bool, fma: bool = False) -> str:
    """The register-blocked micro-kernel and its edge variant for type ``d`` and sum operator ``op``, as
    static C functions named ``pt__ukernel_<type><add|sub>`` and ``pt__uedge_<type><add|sub>``.

    With ``simd`` the block is written with GCC's vector types, one vector per ``lanes`` columns, and each
    row of the right panel is loaded into registers once per ``k``: left to itself, gcc folds the loads
    into the multiplications and loads every vector ``MR`` times (20 loads per 16 products on AVX-512;
    the empty ``asm`` pins the loaded vectors in registers).  Measured here against ``torch.mm`` in one
    process (3 interleaved rounds of 15 calls each, medians, two runs): float32 gemm 256x1024x512 went from
    0.77x torch's speed to 0.78-0.85x, 256x512x1024 from 0.77x to 0.85-0.91x, 1024³ from 0.70x to
    0.88-0.98x; 6 rows instead of 4 measured no better.  Each lane still rounds the product and then the
    sum, as the scalar loop does, unless ``fma``: then gcc may fuse them (``fp-contract=fast`` on these two
    functions only), one rounding per step as BLAS libraries compute."""
    b = blocking(d)
    t = d.c_type
    name = f"{d.name}{'add' if op == '+' else 'sub'}"
    lanes = vector_bytes() // d.itemsize
    nv = b.nr // lanes
    attr = '__attribute__((optimize("fp-contract=fast")))\n' if fma else ""
    head = f"""\
/* C[r][q] {op}= sum over k of ap[k][r] * bp[k][q]: an {b.mr} x {b.nr} block held in registers while k runs;
   ap is a packed {b.mr}-row panel of the left factor, bp a packed {b.nr}-column panel of the right one.
   With load == 0 the block starts at zero instead of C's values (C = 0 {op} ...). */
{attr}static void pt__ukernel_{name}(int64_t kc, const {t} *restrict ap, const {t} *restrict bp, {t} *restrict c,
                               int64_t ldc, int load) {{
"""
    if simd:
        vt = f"pt__v{d.name}"
        pin = "#if defined(__x86_64__)\n      __asm__(\"\" : \"+v\"(bv[v]));\n#endif\n"
        body = f"""\
  typedef {t} {vt} __attribute__((vector_size({vector_bytes()})));
  {vt} acc[{b.mr}][{nv}];
  for (int r = 0; r < {b.mr}; r++)
    for (int v = 0; v < {nv}; v++) {{
      acc[r][v] = ({vt}){{0}};
      if (load) __builtin_memcpy(&acc[r][v], c + r * ldc + v * {lanes}, sizeof({vt}));
    }}
  for (int64_t k = 0; k < kc; k++) {{
    {vt} bv[{nv}];
    for (int v = 0; v < {nv}; v++) {{
      __builtin_memcpy(&bv[v], bp + k * {b.nr} + v * {lanes}, sizeof({vt}));
{pin}    }}
    #pragma GCC unroll {b.mr}
    for (int r = 0; r < {b.mr}; r++) {{
      const {t} av = ap[k * {b.mr} + r];
      for (int v = 0; v < {nv}; v++) acc[r][v] = acc[r][v] {op} av * bv[v];
    }}
  }}
  for (int r = 0; r < {b.mr}; r++)
    for (int v = 0; v < {nv}; v++) __builtin_memcpy(c + r * ldc + v * {lanes}, &acc[r][v], sizeof({vt}));
}}
"""
    else:
        body = f"""\
  {t} acc[{b.mr}][{b.nr}];
  for (int r = 0; r < {b.mr}; r++)
    for (int q = 0; q < {b.nr}; q++) acc[r][q] = load ? c[r * ldc + q] : 0;
  for (int64_t k = 0; k < kc; k++) {{
    #pragma GCC unroll {b.mr}
    for (int r = 0; r < {b.mr}; r++) {{
      const {t} av = ap[k * {b.mr} + r];
      for (int q = 0; q < {b.nr}; q++) acc[r][q] = acc[r][q] {op} av * bp[k * {b.nr} + q];
    }}
  }}
  for (int r = 0; r < {b.mr}; r++)
    for (int q = 0; q < {b.nr}; q++) c[r * ldc + q] = acc[r][q];
}}
"""
    return head + body + f"""\
/* The same on the valid mr x nr corner of a block at the target's ragged edge. */
{attr}static void pt__uedge_{name}(int64_t kc, const {t} *restrict ap, const {t} *restrict bp, {t} *restrict c,
                             int64_t ldc, int64_t mr, int64_t nr, int load) {{
  {t} tile[{b.mr} * {b.nr}] = {{0}};
  for (int64_t r = 0; r < mr && load; r++)
    for (int64_t q = 0; q < nr; q++) tile[r * {b.nr} + q] = c[r * ldc + q];
  pt__ukernel_{name}(kc, ap, bp, tile, {b.nr}, 1);
  for (int64_t r = 0; r < mr; r++)
    for (int64_t q = 0; q < nr; q++) c[r * ldc + q] = tile[r * {b.nr} + q];
}}
"""


def _stored_along(e: Expr, k: str, b: str) -> bool:
    """Whether ``e`` is one array element whose last subscript moves with ``k`` and not with ``b``."""
    return (isinstance(e, Access) and bool(e.index) and k in var_names(e.index[-1], "iter")
            and b not in var_names(e.index[-1], "iter"))


def _matrix(e: Expr, k: str, b: str) -> bool:
    """Whether ``e`` is one array element with ``k`` and ``b`` each alone in a subscript of its own, so
    that distinct ``(k, b)`` read distinct elements."""
    if not isinstance(e, Access):
        return False
    alone = [var_names(ix, "iter") for ix in e.index]
    return alone.count({k}) == 1 and alone.count({b}) == 1 and all(
        names in ({k}, {b}) or not names & {k, b} for names in alone)


def contraction_lines(c: Contraction, *, value: Callable[[Expr], str], ref: Callable[[Access], str],
                      bind: Callable[[dict[str, str], tuple[Expr, ...]], list[str]],
                      assign: Callable[[dict[str, str]], list[str]], ldc: str, threads: bool,
                      epilogue: Callable[[dict[str, str]], list[str]] | None = None) -> list[str]:
    """C statements computing the nest ``c`` (indented by two spaces per level from 0).

    ``value(e)`` prints a factor converted to the nest's type, ``ref(a)`` an array element, ``bind(env,
    exprs)`` the declarations of the statement iterators that ``exprs`` use (``env`` gives the C value of
    the nest's iterators; the others are :attr:`Contraction.fixed`), ``assign(env)`` the statement
    itself, ``epilogue(env)`` :attr:`Contraction.epilogue` (``env`` gives the target's iterators); ``ldc``
    is the distance between two rows of the target.  With ``threads``, the calling
    thread of an OpenMP team computes its share: of the batch points when there are at least as many as
    threads, else of the rows or of the columns."""
    b = blocking(c.dtype)
    t = c.dtype.c_type
    kern = f"{c.dtype.name}{'add' if c.op == '+' else 'sub'}"
    st = c.statement
    lines: list[str] = []

    def out(depth: int, *text: str) -> None:
        lines.extend("  " * depth + x for x in text)

    def scoped(depth: int, env: dict[str, str], exprs: tuple[Expr, ...], body: list[str]) -> None:
        """``body`` in a block declaring the statement iterators that ``exprs`` use."""
        binds = bind(env, exprs)
        if binds:
            out(depth, "{")
            out(depth + 1, *binds, *body)
            out(depth, "}")
        else:
            out(depth, *body)

    def bound(it: str, i: int) -> str:
        return index_expr(c.bounds[it][i]).text

    def extents(names: tuple[str, ...], prefix: str) -> None:
        """Origins ``<prefix>o<j>``, extents ``<prefix>n<j>`` and strides ``<prefix>s<j>`` of a box
        enumerated with its last iterator fastest, and the number of its points, ``<prefix>n``."""
        for j, it in enumerate(names):
            out(1, f"const int64_t {prefix}o{j} = {bound(it, 0)}, "
                   f"{prefix}n{j} = pt__max_int64_t(0, {bound(it, 1)} - {prefix}o{j});")
        for j in reversed(range(len(names))):
            out(1, f"const int64_t {prefix}s{j} = "
                   + (f"{prefix}s{j + 1} * {prefix}n{j + 1};" if j < len(names) - 1 else "1;"))
        out(1, f"const int64_t {prefix}n = " + (f"{prefix}s0 * {prefix}n0;" if names else "1;"))

    def unflatten(depth: int, names: tuple[str, ...], prefix: str, flat: str) -> None:
        """``<prefix><j>``: the point of number ``flat`` of the box of :func:`extents`."""
        flat = f"({flat})" if " " in flat else flat
        for j in range(len(names)):
            q = f"{flat} / {prefix}s{j}" if j < len(names) - 1 else flat
            out(depth, f"const int64_t {prefix}{j} = {prefix}o{j} + " + (f"{q} % {prefix}n{j};" if j else f"{q};"))

    load = "pt__pc > 0" if c.zero_init else "1"  # the first block of k starts at zero when the nest inits
    kenv = {it: f"pt__k{j}" for j, it in enumerate(c.k)}
    zenv = {it: f"pt__z{j}" for j, it in enumerate(c.batch)}
    guard = () if c.guard is None else (c.guard,)
    out(0, f"{{ {comment(f'{st.name}: {st.text()}: packed contraction, {b.mr} x {b.nr} register blocks')}")
    out(1, f"const int64_t pt__a0 = {bound(c.a, 0)}, pt__a1 = {bound(c.a, 1)};",
        f"const int64_t pt__bg0 = {bound(c.b, 0)}, pt__bg1 = {bound(c.b, 1)};")
    extents(c.k, "pt__k")
    extents(c.batch, "pt__z")
    # Without batch points enough for every thread, threads share the rows (each packs all of R) or, when
    # R is a matrix read once (its packing costs its memory traffic: a linear layer's weight) and that
    # makes a thread pack fewer elements, the columns (each packs all of L, once per block of NC columns).
    # A convolution's R is its image read several times from cache: its columns stay with the rows, which
    # keep the target's rows on the thread that the next row-parallel nest gives them to (conv 3x3 16->32
    # on 128x128: 1.00 ms by rows, 1.16 ms by columns; the MLP of benchmarks/torch_cpu.py: 5 to 9 % faster).
    by_cols = (f"!pt__by_batch && pt__nt > 1 && pt__bn / pt__nt + pt__an * ((pt__bn / pt__nt + {b.nc - 1}) / "
               f"{b.nc}) < pt__bn + pt__an / pt__nt * ((pt__bn + {b.nc - 1}) / {b.nc})"
               if len(c.k) == 1 and _matrix(c.right, c.k[0], c.b) else "0")
    out(1, ("const int64_t pt__nt = omp_get_num_threads(), pt__me = omp_get_thread_num();" if threads
            else "const int64_t pt__nt = 1, pt__me = 0;"),
        "const int pt__by_batch = pt__zn >= pt__nt;  /* threads share the batch points, else rows or columns */",
        "const int64_t pt__an = pt__max_int64_t(0, pt__a1 - pt__a0), pt__bn = pt__max_int64_t(0, pt__bg1 - pt__bg0);",
        f"const int pt__by_cols = {by_cols};",
        f"const int64_t pt__blocks = (pt__an + {b.mr - 1}) / {b.mr}, pt__bblocks = (pt__bn + {b.nr - 1}) / {b.nr};",
        "const int64_t pt__lo = pt__by_batch || pt__by_cols ? pt__a0 : "
        f"pt__a0 + pt__blocks * pt__me / pt__nt * {b.mr};",
        "const int64_t pt__hi = pt__by_batch || pt__by_cols ? pt__a1 : "
        f"pt__min_int64_t(pt__a1, pt__a0 + pt__blocks * (pt__me + 1) / pt__nt * {b.mr});",
        f"const int64_t pt__b0 = !pt__by_cols ? pt__bg0 : pt__bg0 + pt__bblocks * pt__me / pt__nt * {b.nr};",
        "const int64_t pt__b1 = !pt__by_cols ? pt__bg1 : "
        f"pt__min_int64_t(pt__bg1, pt__bg0 + pt__bblocks * (pt__me + 1) / pt__nt * {b.nr});",
        "const int64_t pt__zlo = pt__by_batch ? pt__zn * pt__me / pt__nt : 0;",
        "const int64_t pt__zhi = pt__by_batch ? pt__zn * (pt__me + 1) / pt__nt : pt__zn;",
        "if (pt__lo < pt__hi && pt__kn > 0 && pt__b0 < pt__b1 && pt__zlo < pt__zhi) {")
    out(0, "#ifndef PT_NO_PANELS  /* a test hook: -DPT_NO_PANELS runs the fallback below */")
    out(2, f"{t} *pt__bp = aligned_alloc(64, sizeof({t}) * {b.kc * b.nc});",
        f"{t} *pt__ap = aligned_alloc(64, sizeof({t}) * {b.kc * b.mr});")
    out(0, "#else")
    out(2, f"{t} *pt__bp = NULL, *pt__ap = NULL;")
    out(0, "#endif")
    out(2, "int pt__exact = 1;")
    if c.pack_l_once:
        # L does not change with the batch point: its panels are packed once, for all rows, when they
        # fit in the L2 cache (a convolution's weights), instead of once per batch point
        out(2, f"const int64_t pt__wn = (pt__hi - pt__lo + {b.mr - 1}) / {b.mr} * {b.mr} * pt__kn;",
            f"{t} *pt__aw = pt__ap && pt__wn <= {WHOLE_L_BYTES // c.dtype.itemsize} ? "
            f"aligned_alloc(64, (sizeof({t}) * pt__wn + 63) / 64 * 64) : NULL;",
            "if (pt__aw)",
            f"  for (int64_t pt__ic = pt__lo; pt__ic < pt__hi; pt__ic += {b.mr}) {{",
            f"    const int64_t pt__mr = pt__min_int64_t({b.mr}, pt__hi - pt__ic);",
            "    for (int64_t pt__kf = 0; pt__kf < pt__kn; pt__kf++) {")
        unflatten(5, c.k, "pt__k", "pt__kf")
        out(5, f"for (int64_t pt__r = 0; pt__r < {b.mr}; pt__r++)")
        scoped(6, {**kenv, c.a: "pt__ic + pt__r"}, (c.left,),
               [f"pt__aw[((pt__ic - pt__lo) / {b.mr} * pt__kn + pt__kf) * {b.mr} + pt__r] = "
                f"pt__r < pt__mr ? {value(c.left)} : 0;"])
        out(4, "}")
        out(3, "}")
    else:
        out(2, f"{t} *pt__aw = NULL;")
    if c.padded:
        out(2, "/* the zeros of the padded panels are summed too: exact while every value of L is finite */",
            "for (int64_t pt__fa = pt__a0; pt__fa < pt__a1; pt__fa++)",
            "  for (int64_t pt__kf = 0; pt__kf < pt__kn; pt__kf++) {")
        unflatten(4, c.k, "pt__k", "pt__kf")
        scoped(4, {c.a: "pt__fa", **kenv}, (c.left,), [f"pt__exact &= isfinite({value(c.left)});"])
        out(3, "}")
    out(2, "for (int64_t pt__z = pt__zlo; pt__z < pt__zhi; pt__z++) {")
    unflatten(3, c.batch, "pt__z", "pt__z")
    if c.batch_guard is not None:
        scoped(3, zenv, (c.batch_guard,), [f"if (!({index_expr(c.batch_guard).text})) continue;"])
    out(3, "if (pt__ap && pt__bp && pt__exact) {",
        f"  for (int64_t pt__jc = pt__b0; pt__jc < pt__b1; pt__jc += {b.nc}) {{",
        f"    const int64_t pt__nc = pt__min_int64_t({b.nc}, pt__b1 - pt__jc);",
        f"    for (int64_t pt__pc = 0; pt__pc < pt__kn; pt__pc += {b.kc}) {{",
        f"      const int64_t pt__kc = pt__min_int64_t({b.kc}, pt__kn - pt__pc);")
    cond = " && ".join(["pt__jr + pt__q < pt__nc", *(index_expr(g).text for g in guard)])
    pack_r = [f"pt__bp[pt__jr * pt__kc + pt__kk * {b.nr} + pt__q] = {cond} ? {value(c.right)} : 0;"]
    renv = {**zenv, **kenv, c.b: "pt__jc + pt__jr + pt__q"}
    if _stored_along(c.right, c.k[-1], c.b) and len(c.k) == 1:
        # R is stored along k (a transposed weight): read it that way, write the panel with a stride
        out(6, f"for (int64_t pt__jr = 0; pt__jr < pt__nc; pt__jr += {b.nr})",
            f"  for (int64_t pt__q = 0; pt__q < {b.nr}; pt__q++)",
            "    for (int64_t pt__kk = 0; pt__kk < pt__kc; pt__kk++) {")
        unflatten(8, c.k, "pt__k", "pt__pc + pt__kk")
        scoped(8, renv, (c.right, *guard), pack_r)
        out(7, "}")
    else:
        out(6, "for (int64_t pt__kk = 0; pt__kk < pt__kc; pt__kk++) {")
        unflatten(7, c.k, "pt__k", "pt__pc + pt__kk")
        out(7, f"for (int64_t pt__jr = 0; pt__jr < pt__nc; pt__jr += {b.nr})",
            f"  for (int64_t pt__q = 0; pt__q < {b.nr}; pt__q++)")
        scoped(9, renv, (c.right, *guard), pack_r)
        out(6, "}")
    out(6,
        f"for (int64_t pt__ic = pt__lo; pt__ic < pt__hi; pt__ic += {b.mr}) {{",
        f"  const int64_t pt__mr = pt__min_int64_t({b.mr}, pt__hi - pt__ic);",
        f"  const {t} *pt__apk = pt__aw ? pt__aw + ((pt__ic - pt__lo) / {b.mr} * pt__kn + pt__pc) * {b.mr} : pt__ap;",
        "  if (!pt__aw)",
        "    for (int64_t pt__kk = 0; pt__kk < pt__kc; pt__kk++) {")
    unflatten(9, c.k, "pt__k", "pt__pc + pt__kk")
    out(9, f"for (int64_t pt__r = 0; pt__r < {b.mr}; pt__r++)")
    scoped(10, {**zenv, **kenv, c.a: "pt__ic + pt__r"}, (c.left,),
           [f"pt__ap[pt__kk * {b.mr} + pt__r] = pt__r < pt__mr ? {value(c.left)} : 0;"])
    out(8, "}")
    out(7,
        f"for (int64_t pt__jr = 0; pt__jr < pt__nc; pt__jr += {b.nr}) {{",
        f"  const int64_t pt__nr = pt__min_int64_t({b.nr}, pt__nc - pt__jr);")
    scoped(8, {**zenv, c.a: "pt__ic", c.b: "pt__jc + pt__jr"}, (st.target,),
           [f"{t} *pt__c = &{ref(st.target)};",
            f"if (pt__mr == {b.mr} && pt__nr == {b.nr}) "
            f"pt__ukernel_{kern}(pt__kc, pt__apk, pt__bp + pt__jr * pt__kc, pt__c, {ldc}, {load});",
            f"else pt__uedge_{kern}(pt__kc, pt__apk, pt__bp + pt__jr * pt__kc, pt__c, {ldc}, pt__mr, pt__nr, {load});"])
    if epilogue is not None:
        out(8, "if (pt__pc + pt__kc >= pt__kn)  /* the block's sums are complete: its epilogue, in cache */",
            "  for (int64_t pt__r = 0; pt__r < pt__mr; pt__r++)",
            "    for (int64_t pt__q = 0; pt__q < pt__nr; pt__q++) {")
        out(11, *epilogue({**zenv, c.a: "pt__ic + pt__r", c.b: "pt__jc + pt__jr + pt__q"}))
        out(10, "}")
    out(7, "}")
    out(6, "}")
    out(5, "}")
    out(4, "}")
    out(3, "} else {  /* no memory for the panels, or a value of L that is not finite: the same sums, k in order */",
        "  for (int64_t pt__fa = pt__lo; pt__fa < pt__hi; pt__fa++) {")
    if c.zero_init:
        out(5, "for (int64_t pt__fb = pt__b0; pt__fb < pt__b1; pt__fb++)")
        scoped(6, {**zenv, c.a: "pt__fa", c.b: "pt__fb"}, (st.target,), [f"{ref(st.target)} = 0;"])
    out(5, "for (int64_t pt__kf = 0; pt__kf < pt__kn; pt__kf++) {")
    unflatten(6, c.k, "pt__k", "pt__kf")
    out(6, "for (int64_t pt__fb = pt__b0; pt__fb < pt__b1; pt__fb++) {")
    stmt = assign({**zenv, **kenv, c.a: "pt__fa", c.b: "pt__fb"})
    if guard:
        scoped(7, {**zenv, **kenv, c.b: "pt__fb"}, guard,
               [f"if ({index_expr(guard[0]).text}) {{", *("  " + x for x in stmt), "}"])
    else:
        out(7, *stmt)
    out(6, "}")
    out(5, "}")
    if epilogue is not None:
        out(5, "for (int64_t pt__fb = pt__b0; pt__fb < pt__b1; pt__fb++) {")
        out(6, *epilogue({**zenv, c.a: "pt__fa", c.b: "pt__fb"}))
        out(5, "}")
    out(4, "}")
    out(3, "}")
    out(2, "}", "free(pt__aw);", "free(pt__ap);", "free(pt__bp);")
    out(1, "}")
    out(0, "}")
    return lines


__all__ = ["Blocking", "Contraction", "blocking", "contraction_lines", "describe", "epilogue_iterators",
           "find_contraction", "find_domain_contraction", "micro_kernel", "read_back_by_epilogues",
           "vector_bytes"]
