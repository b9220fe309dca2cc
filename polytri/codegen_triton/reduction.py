"""Reductions and contractions recognized on the scheduled loop tree.

A *reduction loop* is an innermost loop whose body is one update ``T = T op f`` (``op`` one of ``+``,
``-``, ``max``, ``min``, ``nanmax``, ``nanmin``: :mod:`polytri.ir.reduction`, which also gives each
operation's identity) where the target ``T`` does not depend on the loop counter and ``f`` does not read ``T``'s array: the
loop's iterations then only combine values of ``f``, which may be computed for a whole chunk of the loop
at once and combined with ``tl.sum`` / ``tl.max`` / ``tl.min`` (the order of a floating-point sum
changes; nothing else does).

A *contraction* is a sum reduction inside a kernel with two block dimensions ``a`` and ``b`` whose
``f`` is a product of exactly two factors that depend on the loop counter ``k``, one on ``(a, k)`` and
one on ``(k, b)``, times factors free of ``k``: ``C[a, b] += s * X[a, k] * Y[k, b]``.  Its sum over a
chunk of ``k`` is ``tl.dot`` of an ``X`` tile and a ``Y`` tile.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import dtypes
from ..dtypes import BFLOAT16, BOOL, FLOAT16, FLOAT32, FLOAT64, INT8, INT32, DType
from ..ir.expr import Access, Binary, Cast, Expr, accesses, substitute, var_names
from ..ir.indirect import has_indirect
from ..ir.program import Program, Statement
from ..ir.reduction import UpdateOp, update_of
from ..ir.types import Typer
from ..schedule.loop_ast import Block, For, Node, Run, walk


@dataclass(frozen=True, slots=True)
class Reduction:
    """``target = target op term`` over the loop ``loop`` (iterators already replaced by counters)."""

    loop: For
    """The reduced loop."""
    statement: Statement
    """The statement it runs."""
    target: Access
    """The written element, in loop counters."""
    op: UpdateOp
    """The update's operation (:class:`polytri.ir.reduction.Update`)."""
    term: Expr
    """The combined value ``f``, in loop counters."""
    value: Expr
    """The whole right-hand side, in loop counters."""


@dataclass(frozen=True, slots=True)
class Contraction:
    """A sum reduction that ``tl.dot`` computes: ``term = prod(scale) * x * y``."""

    reduction: Reduction
    """The underlying reduction."""
    x: Access
    """Operand depending on the first block dimension and the loop counter (loaded as stored)."""
    y: Access
    """Operand depending on the loop counter and the second block dimension."""
    scale: tuple[Expr, ...]
    """Factors free of the loop counter."""
    operand: DType
    """Element type of both tiles given to ``tl.dot``."""
    accumulator: DType
    """Type ``tl.dot`` accumulates in."""


def _runs(n: Node) -> list[Run] | None:
    """The statements of a loop body made of statements only (no loops, no guards), in order."""
    if isinstance(n, Run):
        return [n]
    if isinstance(n, Block):
        out: list[Run] = []
        for c in n.body:
            sub = _runs(c)
            if sub is None:
                return None
            out += sub
        return out
    return None


def find_reductions(loop: For, program: Program) -> list[Reduction] | None:
    """The reductions ``loop`` performs (one per statement of its body, several sharing the loop), or
    ``None`` when some statement of the body is not a reduction or reads what another one reduces."""
    runs = _runs(loop.body)
    if not runs or loop.step != 1:
        return None
    found = [_reduction(loop, program, run) for run in runs]
    if any(r is None for r in found):
        return None
    reds = [r for r in found if r is not None]
    targets = {r.target.array for r in reds}
    if len(targets) != len(reds) or any(a.array in targets for r in reds for a in accesses(r.term)):
        return None
    return reds


def find_reduction(loop: For, program: Program) -> Reduction | None:
    """The reduction ``loop`` performs when its body is one statement, or ``None``."""
    reds = find_reductions(loop, program)
    return reds[0] if reds and len(reds) == 1 else None


def _reduction(loop: For, program: Program, run: Run) -> Reduction | None:
    st = program.statement(run.statement)
    env = dict(zip(st.iterators, run.args))
    target = substitute(st.target, env)
    value = substitute(st.value, env)
    if not isinstance(target, Access) or loop.var in var_names(target, "iter"):
        return None
    found = update_of(target, value)
    if found is None or loop.var not in var_names(found.term, "iter"):
        return None
    return Reduction(loop, st, target, found.op, found.term, value)


def _factors(e: Expr) -> list[Expr]:
    if isinstance(e, Binary) and e.op == "*":
        return _factors(e.lhs) + _factors(e.rhs)
    return [e]


def _operand(e: Expr, typer: Typer) -> tuple[Access, DType] | None:
    """The array read by a contraction factor and the type ``tl.dot`` takes it in."""
    if isinstance(e, Access):
        d = typer(e).dtype
        # int8 products wrap around in int8: only widened operands (int32(A[i, k])) are exact in tl.dot
        return (e, d) if d.kind == "f" else None
    if isinstance(e, Cast) and isinstance(e.operand, Access):
        src, to = typer(e.operand).dtype, dtypes.dtype(e.dtype)
        if src is to or (src is INT8 and to is INT32) or (src in (FLOAT16, BFLOAT16) and to is FLOAT32):
            return e.operand, src  # the widening is exact: tl.dot widens in its accumulator
    return None


def find_contraction(red: Reduction, typer: Typer, a: str, b: str) -> Contraction | None:
    """``red`` as a contraction over block dimensions ``a`` (rows) and ``b`` (columns), or ``None``."""
    if red.op not in ("+", "-") or has_indirect(red.term):  # tl.dot operands are blocks at affine offsets
        return None
    k = red.loop.var
    bounds = var_names(red.loop.lower, "iter") | var_names(red.loop.cond, "iter")
    if {a, b} <= bounds:
        return None  # a triangle in both block dimensions: no operand mask can express it
    factors = _factors(red.term)
    with_k = [f for f in factors if k in var_names(f, "iter")]
    scale = tuple(f for f in factors if k not in var_names(f, "iter"))
    if len(with_k) != 2:
        return None
    ops = [_operand(f, typer) for f in with_k]
    if ops[0] is None or ops[1] is None:
        return None
    (p, tp), (q, tq) = ops[0], ops[1]
    if tp is not tq:
        return None
    blocks = {a, b}
    if var_names(p, "iter") & blocks == {b} and var_names(q, "iter") & blocks == {a}:
        p, q = q, p
    if not (var_names(p, "iter") & blocks == {a} and var_names(q, "iter") & blocks == {b}
            and k in var_names(p, "iter") and k in var_names(q, "iter")):
        return None
    acc = {FLOAT16: FLOAT32, BFLOAT16: FLOAT32, FLOAT32: FLOAT32, FLOAT64: FLOAT64, INT8: INT32}.get(tp)
    if acc is None:
        return None
    return Contraction(red, p, q, scale, tp, acc)


# --- which launches run their products on tl.dot ----------------------------------------------------
def _contractions(body: Node, find) -> list[tuple[For, Contraction]]:
    """The loops of ``body`` at which ``find`` recognizes a contraction, with it."""
    return [(n, con) for n in walk(body) if isinstance(n, For) and (con := find(n)) is not None]


def _dot_sites(body: Node, program: Program, typer: Typer, rows: str, cols: str) -> list[tuple[For, Contraction]]:
    def find(n: For) -> Contraction | None:
        red = find_reduction(n, program) if n.innermost else None
        return find_contraction(red, typer, rows, cols) if red else None
    return _contractions(body, find)


def column_contraction(loop: For, program: Program, typer: Typer, rows: str) -> Contraction | None:
    """The contraction ``C[rows, j] += X[rows, k] * Y[k, j]`` when ``loop`` is a parallel unit-step loop
    over ``j`` whose body is exactly one innermost sum loop over ``k``: a launch whose one block dimension
    is ``rows`` runs ``loop`` in chunks along a second block axis, and the sum over each chunk is
    ``tl.dot`` (row-block programs: the products of attention, fused with its softmax below the rows)."""
    if not loop.parallel or loop.step != 1 or loop.innermost:
        return None
    body = loop.body
    while isinstance(body, Block) and len(body.body) == 1:
        body = body.body[0]
    if not isinstance(body, For) or not body.innermost:
        return None
    red = find_reduction(body, program)
    return find_contraction(red, typer, rows, loop.var) if red else None


@dataclass(frozen=True)
class SumPlan:
    """How one launch computes its sums (:func:`sum_plan`), decided before its kernel is printed."""

    kind: str
    """``grid``, ``columns`` or ``none``: how its products run on ``tl.dot`` (:func:`dot_launch`)."""
    dots: dict[int, Contraction]
    """The contraction computed by each sum loop that ``tl.dot`` runs, by the loop's ``id``."""
    columns: frozenset[int] = frozenset()
    """The ``id`` of each loop whose iterations are the columns of a product, run in chunks (``columns``)."""
    reductions: dict[int, tuple[Reduction, ...]] = field(default_factory=dict)
    """The reductions each other innermost loop performs, combined over chunks of it (``tl.sum``,
    ``tl.max``, ``tl.min``), by the loop's ``id``; boolean ones excepted (they run as loops)."""


def _dot_sites_of(chain: tuple[For, ...], body: Node, program: Program, typer: Typer
                  ) -> tuple[str, dict[int, Contraction], frozenset[int]]:
    if len(chain) >= 2:
        sites = _dot_sites(body, program, typer, chain[-2].var, chain[-1].var)
        if sites:
            return "grid", {id(n): con for n, con in sites}, frozenset()
    if chain:
        sites = _contractions(body, lambda n: column_contraction(n, program, typer, chain[-1].var))
        if sites:
            return "columns", {id(con.reduction.loop): con for _, con in sites}, frozenset(id(n) for n, _ in sites)
    return "none", {}, frozenset()


def sum_plan(chain: tuple[For, ...], body: Node, program: Program, typer: Typer) -> SumPlan:
    """:func:`dot_launch`'s choice for a launch with grid loops ``chain`` and ``body``, with the loops it
    concerns, and the block reductions of its other innermost loops."""
    kind, dots, columns = _dot_sites_of(chain, body, program, typer)
    reductions = {}
    for n in walk(body):
        if isinstance(n, For) and n.innermost and id(n) not in dots:
            reds = find_reductions(n, program)
            if reds and all(typer(r.value).dtype is not BOOL for r in reds):
                reductions[id(n)] = tuple(reds)
    return SumPlan(kind, dots, columns, reductions)


def dot_launch(chain: tuple[For, ...], body: Node, program: Program, typer: Typer) -> tuple[str, list[Contraction]]:
    """How a launch with grid loops ``chain`` and ``body`` runs its products on ``tl.dot``: ``grid`` (2-D
    blocks over the two innermost grid loops, the products' rows and columns), ``columns`` (1-D blocks
    over the innermost grid loop, the products' rows; their columns run in chunks of an inner loop, see
    :func:`column_contraction`) or ``none``; and those products.  Tiles over the grid come first."""
    kind, dots, _ = _dot_sites_of(chain, body, program, typer)
    return kind, list(dots.values())
