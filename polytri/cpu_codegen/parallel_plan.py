"""Which parallel loops open an OpenMP region: those whose work pays for a region's fork and join.

A parallel loop's work is bounded by :func:`polytri.schedule.loop_work.loop_work` (operations per
instance of each statement, times trip counts: an expression of the parameters and outer counters).  The
generated code tests that bound each time the loop is reached against ``pt__min_parallel_work``, the
smallest work worth a region on this machine (:mod:`.fork_cost`), an argument of the generated function
(so the C source does not depend on the machine, and kernels of one source may use different
thresholds); below it, or when one thread is asked for, the calling thread runs the same loop, printed
inline (a contraction nest calls its outlined function, whose orphaned ``omp for`` binds to a team of
one).  A loop whose bound cannot be expressed (bounds outside the affine forms) always opens its region.

A loop whose iterations run unequal work (a loop inside whose trip count grows with the parallel counter,
with no constant bound: the rows of a triangle, the tiles of a wavefront) hands its iterations out one at
a time as threads finish (``schedule(dynamic, 1)``); the others split them into equal blocks
(``schedule(static)``), which keeps each thread on the same data from one region to the next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..ir.expr import Access, Binary, Call, Expr, Unary, children, var_names
from ..ir.program import Program, Statement
from ..ir.reduction import is_nan_extreme, nan_select
from ..pipeline.decisions import Decision
from ..schedule.loop_ast import For, Run, walk
from ..schedule.loop_work import Work, constant_bound, loop_work, trip_count
from .cexpr import index_expr

Verdict = Literal["parallel", "runtime"]
"""``parallel``: the region always opens; ``runtime``: it opens when its work reaches the threshold."""
Split = Literal["static", "dynamic"]
"""How the iterations are handed to the threads: equal blocks, or one at a time as threads finish."""
MIN_WORK = "pt__min_parallel_work"
"""The generated function's argument holding the threshold."""
MAX_BOUND_CHARS = 2000
"""Longest work bound printed in a region's test (see :meth:`RegionChoice.condition`)."""


def _operations(e: Expr) -> int:
    """Loads and arithmetic operations of ``e`` (not those of its subscripts); a ``nanmax`` / ``nanmin``
    counts as the select it is computed with."""
    if is_nan_extreme(e):
        return _operations(nan_select(e))
    if isinstance(e, Access):
        return 1
    own = 1 if isinstance(e, (Binary, Unary, Call)) else 0
    return own + sum(_operations(c) for c in children(e))


def weight(st: Statement) -> int:
    """Operations of one instance of ``st``: its store, and each load and arithmetic operation."""
    return 1 + _operations(st.value)


@dataclass(frozen=True)
class RegionChoice:
    """The choice for one parallel loop."""

    loop: str
    """The loop's counter."""
    statements: tuple[str, ...]
    """The statements it runs."""
    work: Work
    """The bound on its work per execution."""
    verdict: Verdict
    """``runtime`` when the generated code tests the bound, ``parallel`` when the region always opens."""
    trips: Expr | None = None
    """An upper bound of the loop's trip count (in the parameters and the counters outside), or ``None``:
    a region over fewer iterations than threads leaves threads idle."""
    split: Split = "static"
    """``dynamic`` when the work of an iteration grows or shrinks with the counter (see the module's text)."""

    @property
    def pragma_schedule(self) -> str:
        """The ``schedule`` clause of the loop's ``omp for``."""
        return "schedule(dynamic, 1)" if self.split == "dynamic" else "schedule(static)"

    def condition(self) -> str:
        """C text of the test that opens the region: enough work (tested first: the common, cheap
        refusal), over enough iterations (``pt__region_pays``).  A work bound whose text outgrows
        :data:`MAX_BOUND_CHARS` (the bounds of loops split around guards inside time tiles, substituted
        into one another), even loosened (:func:`choose_region`), is not printed: such a region opens
        whenever its loop has two iterations."""
        if self.trips is None:
            return f"pt__threads > 1 && {self.work_text()} >= {MIN_WORK}"
        trips = index_expr(self.trips).text
        if self.bound_too_long():
            return f"pt__threads > 1 && (double)({trips}) >= 2.0"
        work = self.work_text()
        return (f"pt__threads > 1 && {work} >= {MIN_WORK} && "
                f"pt__region_pays({work}, (double)({trips}), pt__threads, {MIN_WORK})")

    def bound_too_long(self) -> bool:
        """Whether the work bound's C text is too long to print in the region's test."""
        return _too_long(self.work)

    def work_text(self) -> str:
        """C text of the work bound (in ``double``)."""
        return work_text(self.work)

    def decision(self, min_work: float) -> Decision:
        """The record of this choice, the region's threshold being ``min_work`` operations."""
        where = f"loop {self.loop} ({', '.join(self.statements)})"
        if self.split == "dynamic":
            where += ", iterations of unequal work handed out one at a time"
        value = self.work.value()
        if self.verdict == "parallel":
            text = f"{where}: an OpenMP region (its work has no affine bound)"
        elif value is None:
            if self.trips is not None and self.bound_too_long():
                return Decision("codegen", f"region-{self.verdict}", self.loop,
                                f"{where}: an OpenMP region when its loop has two iterations or more (its work "
                                f"bound is too long an expression to test)",
                                {"min_work": min_work, "work": value, "statements": self.statements,
                                 "split": self.split})
            split = (", less what its iterations split unevenly over the threads leave idle"
                     if self.trips is not None else "")
            text = (f"{where}: an OpenMP region when its work, a function of the sizes, reaches {min_work:.3g} "
                    f"operations{split} (tested each time the loop starts)")
        else:
            verb = "an OpenMP region" if value >= min_work else "runs on one thread"
            text = f"{where}: {verb}, {value:.3g} operations per run, {min_work:.3g} needed for a region"
        return Decision("codegen", f"region-{self.verdict}", self.loop, text,
                        {"min_work": min_work, "work": value, "statements": self.statements, "split": self.split})


def work_text(work: Work) -> str:
    """C text of a work bound (in ``double``); terms of the same trip counts (the unrolled rows of a jammed
    loop) are printed once, their weights summed."""
    assert work.terms is not None
    weights: dict[str, int] = {}
    for t in work.terms:
        trips = "".join(f" * (double)({index_expr(e).text})" for e in t.trips)
        weights[trips] = weights.get(trips, 0) + t.weight
    return f"({' + '.join(f'{w}.0{trips}' for trips, w in weights.items())})"


def _too_long(work: Work) -> bool:
    return work.terms is not None and len(work_text(work)) > MAX_BOUND_CHARS


def choose_region(loop: For, program: Program, tested: bool = True) -> RegionChoice:
    """The choice for the parallel loop ``loop`` (``tested`` false: every region opens).  A work bound
    too long to print is loosened first (:meth:`~polytri.schedule.loop_work.Work.loosened`: the point
    loops of tiles counted whole, each other ``min`` at its shorter side)."""
    stmts = tuple(dict.fromkeys(r.statement for r in walk(loop) if isinstance(r, Run)))
    weights = {s: weight(program.statement(s)) for s in stmts}
    work = loop_work(loop, weights.__getitem__)
    if _too_long(work):
        work = work.loosened()
    verdict: Verdict = "runtime" if tested and work.terms is not None else "parallel"
    trip = trip_count(loop, {})
    split: Split = "dynamic" if _uneven(loop, weights) else "static"
    return RegionChoice(loop.var, stmts, work, verdict, None if trip is None else trip[0], split)


def _uneven(loop: For, weights: dict[str, int]) -> bool:
    """Whether the work of one iteration of ``loop`` grows or shrinks with its counter without a constant
    bound: a loop inside whose trip count depends on the counter and has no constant upper bound (a
    partial tile at the edge does not count)."""
    body = loop_work(loop.body, weights.__getitem__)
    return body.terms is not None and any(
        loop.var in var_names(trip, "iter") and constant_bound(trip) is None
        for t in body.terms for trip in t.trips)


__all__ = ["MIN_WORK", "RegionChoice", "Split", "choose_region", "weight", "work_text"]
