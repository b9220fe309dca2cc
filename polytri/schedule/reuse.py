"""Reuse that a loop nest loses to the cache, as a condition on the sizes: where tiling pays.

A loop ``L`` carries temporal reuse when some access inside it does not move with ``L``'s counter (syrk's
``A[j, k]`` in the loop over ``i``; a stencil's ``A[i, j]`` in its time loop): every iteration of ``L``
reads the same elements again.  They are still in the cache for the next iteration only if what one
iteration touches fits in it.  One iteration of ``L`` touches, for each array, about the product of the
trip counts of the loops inside ``L`` that the array's subscripts move with (the largest over the array's
accesses: a stencil's neighbours overlap), times the element size.  When that exceeds the cache, the
reuse comes from memory each time and tiling, which shortens the distance between reuses, pays; when it
fits, tiling only adds loop overhead (PolyBench's syrk at the MEDIUM size runs slower tiled, at the LARGE
size faster).

:func:`reuse_exceeding` turns this into an expression of the parameters, evaluated when the kernel runs:
the sizes are symbolic when the program is compiled.  Trip counts are upper bounds
(:func:`.loop_work.trip_count`), so the footprint is too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..dtypes import dtype
from ..ir.affine import const_value
from ..ir.expr import Access, Binary, Const, Expr, substitute, var_names
from ..ir.printer import expr_to_str
from ..ir.program import Program
from .loop_ast import Block, For, If, Node, Run
from .loop_work import Range, trip_count


@dataclass(frozen=True)
class Reuse:
    """Loop ``loop`` rereads ``access`` on every iteration, which touches ``footprint`` bytes."""

    loop: str
    """The loop's counter (``c1``)."""
    statement: str
    """The statement of the reused access."""
    access: str
    """The reused access, ``S0: A[j, k]``."""
    footprint: Expr
    """Bytes one iteration of the loop touches (an upper bound, in the parameters)."""

    def text(self) -> str:
        return f"loop {self.loop} rereads {self.access}, touching {expr_to_str(self.footprint)} bytes per iteration"


def loop_reuse(program: Program, ast: Node) -> list[Reuse]:
    """Each loop of ``ast`` that carries temporal reuse and whose iterations sweep some array in two or
    more dimensions, with the bytes one of its iterations touches (loops whose bounds are not affine, or
    whose footprint involves the counters of loops around them, are left out)."""
    found: list[Reuse] = []
    _visit(program, ast, {}, found)
    return found


def reuse_exceeding(program: Program, ast: Node, cache_bytes: int,
                    blocked: frozenset[str] = frozenset()) -> tuple[Expr, list[Reuse]] | None:
    """``footprint_1 > cache or footprint_2 > cache or ...`` over the loops of ``ast`` that carry reuse
    (of statements not in ``blocked``), with those loops; ``None`` when no loop carries reuse.  A
    footprint without parameters that fits the cache is left out: its test is false at every call (a
    graph captured with static shapes), and a kernel that carried the other version anyway would be
    compiled for nothing."""
    reuse = [r for r in loop_reuse(program, ast) if r.statement not in blocked and not _always_fits(r, cache_bytes)]
    if not reuse:
        return None
    cond: Expr | None = None
    for r in reuse:
        test = Binary(">", r.footprint, Const(cache_bytes))
        cond = test if cond is None else Binary("or", cond, test)
    assert cond is not None
    return cond, reuse


def _always_fits(r: Reuse, cache_bytes: int) -> bool:
    """Whether ``r``'s footprint is a constant no larger than ``cache_bytes``."""
    v = const_value(r.footprint)
    return v is not None and v <= cache_bytes


def _visit(program: Program, n: Node, ranges: dict[str, Range], found: list[Reuse]) -> None:
    if isinstance(n, For):
        trip = trip_count(n, ranges)
        if trip is None:
            return
        inner = {**ranges, n.var: trip[1]}
        if not n.innermost:
            got = _reuse_of(program, n, inner)
            if got is not None:
                found.append(got)
        _visit(program, n.body, inner, found)
    elif isinstance(n, Block):
        for c in n.body:
            _visit(program, c, ranges, found)
    elif isinstance(n, If):
        _visit(program, n.then, ranges, found)
        if n.orelse is not None:
            _visit(program, n.orelse, ranges, found)


def _reuse_of(program: Program, loop: For, ranges: Mapping[str, Range]) -> Reuse | None:
    """The reuse ``loop`` carries, if any, with its footprint."""
    sizes: dict[str, tuple[int, Expr]] = {}   # array -> (number of loops its subscripts move with, bytes)
    reused: tuple[str, str] | None = None
    for run, loops, acc in _accesses(program, loop.body, ranges):
        moved = set().union(*(var_names(e, "iter") for e in acc.index)) if acc.index else set()
        if loop.var not in moved and reused is None and acc.index:
            reused = (run.statement, f"{run.statement}: {expr_to_str(acc)}")
        trips = [trip for var, trip in loops if var in moved]
        if any(var_names(t, "iter") for t in trips):
            return None   # the footprint depends on counters outside the loop
        size: Expr = Const(dtype(program.array(acc.array).dtype).itemsize)
        for t in trips:
            size = Binary("*", size, t)
        if acc.array not in sizes or len(trips) > sizes[acc.array][0]:
            sizes[acc.array] = (len(trips), size)
    if reused is None or max(n for n, _ in sizes.values()) < 2:
        return None   # an iteration that sweeps rows only: a row fits the cache at any practical size
    total: Expr | None = None
    for _, size in sizes.values():
        total = size if total is None else Binary("+", total, size)
    assert total is not None
    return Reuse(loop.var, reused[0], reused[1], total)


def _accesses(program: Program, n: Node, ranges: Mapping[str, Range],
              loops: tuple[tuple[str, Expr], ...] = ()) -> list[tuple[Run, tuple[tuple[str, Expr], ...], Access]]:
    """Every array access run inside ``n``, in terms of the loop counters, with the loops (counter, trip
    count) between ``n`` and it."""
    if isinstance(n, Run):
        st = program.statement(n.statement)
        env = dict(zip(st.iterators, n.args))
        out = []
        for acc in (st.target, *st.reads):
            if any(a.name == acc.array for a in program.arrays):
                moved = substitute(acc, env)
                assert isinstance(moved, Access)
                out.append((n, loops, moved))
        return out
    if isinstance(n, For):
        trip = trip_count(n, ranges)
        if trip is None:
            return []
        return _accesses(program, n.body, {**ranges, n.var: trip[1]}, loops + ((n.var, trip[0]),))
    children = n.body if isinstance(n, Block) else (n.then,) + ((n.orelse,) if n.orelse is not None else ())
    return [a for c in children for a in _accesses(program, c, ranges, loops)]


__all__ = ["Reuse", "loop_reuse", "reuse_exceeding"]
