"""A sequential loop run by a team of threads in blocks, the seams between the blocks deferred.

A loop that carries dependences cannot hand out its iterations to threads as they are.  But where every
dependence it carries spans at most ``D`` of its iterations and ends at a statement that is the source
of no dependence inside the loop (a consumer fused behind its producer with a shift: the vertical pass of
a blur, ``D`` rows behind the horizontal one), the loop's iterations can be cut into blocks that threads
run side by side, in two phases:

1. each block runs its iterations in order, except, in every block but the first, the instances of those
   consumers (the *deferred* statements) in its first ``D`` iterations: they may read what the block
   before produces;
2. after a barrier, the deferred instances run, block by block, each block's in order.

Every instance of the first phase reads only what its own block wrote before it (a statement that is the
sink of no carried dependence reads within its iteration; a deferred one, ``D`` iterations past the
block's start, reads at most ``D`` back).  Every deferred instance runs after everything it reads, and
nothing reads or overwrites what it touches in the loop, so running it late changes no value.  This is
split tiling (Grosser, Cohen, Kelly, Ramanujam and Sadayappan, 2013) with one dimension cut.

It pays where the loop, or the parallel loop around it, leaves threads idle: blur's three channels split
over two threads run three channel-rounds' time on two threads (one idle half the time); cut into blocks,
each thread runs half of each channel.  The blocks are as many as needed for the team to divide the
parallel loop's iterations times the blocks (``threads / gcd(trips, threads)``; one, where the trips
divide evenly: the loop runs as before), and no block is shorter than :data:`MIN_BLOCK_WINDOWS` windows.

:func:`find_seams` finds the loops (with isl: the distances along the loop of the dependences among its
statements); the C printer prints them (``cgen.py``).  The analysis needs the schedule the loop AST
scans: a kernel carrying two schedules (``schedule/choose.py``) is left as it is, and so is a tiled
schedule (its distances are integer optima over floor divisions: minutes for a time-tiled fdtd-2d).
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ..ir.islutil import maps
from ..ir.program import Program
from ..pipeline.decisions import Decision
from ..schedule.dependences import Dependences
from ..schedule.loop_ast import Block, For, If, Node, Run, loop_upper, run_counts, walk
from ..schedule.schedule import time_dependences, within_loop
from .row_ring import RowRing, find_rings

MIN_BLOCK_WINDOWS = 4
"""A block is at least this many deferral windows long: the deferred instances, which run after a barrier
and read what another thread wrote, stay a small part of each block's work."""
MAX_WINDOW = 64
"""The longest deferral window (iterations of the loop) considered."""


@dataclass(frozen=True)
class Seams:
    """A sequential loop run in blocks, with its deferred statements."""

    loop: str
    """The sequential loop's counter."""
    outer: str | None
    """The counter of the parallel loop directly around it, whose iterations are handed out with the
    blocks (``None``: the sequential loop is outermost in its region)."""
    deferred: tuple[str, ...]
    """The statements whose instances in a block's first :attr:`window` iterations run after the barrier."""
    window: int
    """The longest distance (in iterations of the loop) of a dependence that it carries."""
    rings: tuple[RowRing, ...] = ()
    """The arrays whose rows its blocks keep in a ring (:mod:`.row_ring`)."""

    def decision(self) -> Decision:
        """The record of this choice."""
        around = "" if self.outer is None else f", with the iterations of loop {self.outer}"
        text = (f"loop {self.loop}: run in blocks by the team{around}; {', '.join(self.deferred)} "
                f"{'waits' if len(self.deferred) == 1 else 'wait'} for a barrier in each block's first "
                f"{self.window} iteration{'s' if self.window > 1 else ''} (its dependences span at most "
                f"{self.window}, and end at statements that feed nothing in the loop)")
        if self.rings:
            text += "; where the arrays outgrow the last-level cache, " + "; ".join(r.text() for r in self.rings)
        return Decision("codegen", "seams", self.loop, text,
                        {"outer": self.outer, "deferred": self.deferred, "window": self.window,
                         "rings": tuple(r.array for r in self.rings),
                         "ahead": tuple(dict.fromkeys(a.array for r in self.rings if r.ahead for a in r.ahead.reads))})


def only_loop(n: Node) -> For | None:
    """The loop that is all of ``n`` (through blocks of one node), or ``None``."""
    while isinstance(n, Block) and len(n.body) == 1:
        n = n.body[0]
    return n if isinstance(n, For) else None


def _unit_loop(n: For) -> bool:
    """A loop of unit step whose condition compares its counter with an upper bound (:func:`loop_upper`)."""
    return n.step == 1 and loop_upper(n) is not None


def _window(schedule: isl.UnionMap, deps: Dependences, loop: For) -> tuple[tuple[str, ...], int] | None:
    """The deferred statements and the window of ``loop``, or ``None`` where some dependence it carries
    ends at a statement that is the source of a dependence inside it, or spans no constant distance.  The
    distances (parametric integer optima, slow on tiled schedules) are computed last."""
    inside = {r.statement for r in walk(loop.body) if isinstance(r, Run)}
    sources: set[str] = set()
    carried: list[tuple[str, isl.Map]] = []
    for m in maps(deps.all):
        src, dst = m.get_tuple_name(isl.dim_type.in_), m.get_tuple_name(isl.dim_type.out)
        if src not in inside or dst not in inside:
            continue
        tdeps = time_dependences(schedule, isl.UnionMap.from_map(m))
        if tdeps is None:
            continue
        same = within_loop(tdeps, loop.dim)
        if same.is_empty():
            continue
        sources.add(src)
        far = same.order_lt(isl.dim_type.in_, loop.dim, isl.dim_type.out, loop.dim)
        if not far.is_empty():
            carried.append((dst, far))
    if not carried or {dst for dst, _ in carried} & sources:
        return None
    reach: dict[str, int] = {}
    for dst, far in carried:
        try:
            furthest = far.deltas().dim_max(loop.dim)
        except isl.Error:  # unbounded
            return None
        if not furthest.is_cst():
            return None
        reach[dst] = max([reach.get(dst, 0)] + [int(aff.get_constant_val().to_python())
                                               for _, aff in furthest.get_pieces()])
    window = max(reach.values())
    return (tuple(sorted(reach)), window) if window <= MAX_WINDOW else None


def parts_lines(trips: str | None) -> list[str]:
    """C lines that set ``pt__parts``, the blocks per iteration of the parallel loop of ``trips`` iterations
    (C text; ``None``: no parallel loop), in a region: the fewest that make the team divide the blocks."""
    if trips is None:
        return ["const int64_t pt__parts = omp_get_num_threads();"]
    return ["const int64_t pt__team = omp_get_num_threads();",
            f"const int64_t pt__trips = pt__max_int64_t({trips}, 1);",
            "int64_t pt__parts = 1;",
            "while (pt__trips * pt__parts % pt__team != 0) pt__parts += 1;"]


def block_lines(first: str, end: str, window: int) -> list[str]:
    """C lines that bound block ``pt__b`` of a loop from ``first`` to ``end`` (C text, excluded): its
    iterations ``[pt__lo, pt__hi)``, deferred instances in ``[pt__lo, pt__mid)``.  The loop is cut into
    ``pt__parts`` blocks, fewer where they would be shorter than :data:`MIN_BLOCK_WINDOWS` windows (the
    blocks past them are empty)."""
    return [f"const int64_t pt__first = {first};",
            f"const int64_t pt__len = pt__max_int64_t({end} - pt__first, 0);",
            f"const int64_t pt__n = pt__max_int64_t(pt__min_int64_t(pt__parts, pt__len / {MIN_BLOCK_WINDOWS * window}), 1);",
            "const int64_t pt__lo = pt__first + pt__len * pt__min_int64_t(pt__b, pt__n) / pt__n;",
            "const int64_t pt__hi = pt__first + pt__len * pt__min_int64_t(pt__b + 1, pt__n) / pt__n;",
            f"const int64_t pt__mid = pt__b == 0 ? pt__lo : pt__min_int64_t(pt__lo + {window}, pt__hi);"]


def find_seams(program: Program, schedule: isl.UnionMap, deps: Dependences, ast: Node) -> dict[int, Seams]:
    """The loops of ``ast`` (scanning ``schedule``) that run in blocks, by the ``id`` of the loop that opens
    their region: a parallel loop whose body is one sequential loop (the blocks are handed out with its
    iterations), or a sequential loop in no parallel loop; with the rows of ``program``'s arrays they may
    keep in a ring (:mod:`.row_ring`)."""
    found: dict[int, Seams] = {}
    runs = run_counts(ast)

    def visit(n: Node) -> None:
        if isinstance(n, Block):
            for c in n.body:
                visit(c)
        elif isinstance(n, If):
            visit(n.then)
            if n.orelse is not None:
                visit(n.orelse)
        elif isinstance(n, For):
            inner = only_loop(n.body) if n.parallel else n
            if inner is not None and not inner.parallel and _unit_loop(inner) and _unit_loop(n):
                window = _window(schedule, deps, inner)
                if window is not None:
                    deferred, span = window
                    rings = find_rings(program, deps, schedule, n, inner, span, deferred, runs)
                    found[id(n)] = Seams(inner.var, n.var if n.parallel else None, deferred, span, rings)
                    return
            if not n.parallel:  # no region opens inside a parallel loop
                visit(n.body)

    visit(ast)
    return found


__all__ = ["MIN_BLOCK_WINDOWS", "Seams", "block_lines", "find_seams", "only_loop", "parts_lines"]
