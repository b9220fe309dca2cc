"""Which schedule a program runs: the input order, Pluto's, or Pluto's tiled, each proved legal with isl.

The ``auto`` choice keeps the input order where Pluto's schedule loses parallelism or locality the input
order has (see :func:`choose_schedule`); a scheduler failure or a schedule that cannot be proved legal
falls back to the input order with a warning, never to wrong code.

Each choice is a :class:`~polytri.pipeline.decisions.Decision` of stage ``schedule``: kind
``original-order`` (``data["reason"]``: ``option``, ``empty`` (no statement instance runs),
``scheduler-error``, ``parallelism-lost``, ``locality-lost`` or ``guarded-vector-loop``), ``pluto``, ``tiling-dropped`` (the tiled schedule failed
its proof), ``tile-by-size``, ``tile-by-count`` or ``time-tile-by-count`` (the kernel carries two schedules:
:class:`~polytri.schedule.schedule.Alternative`), then the scheduler's own
decisions (``fusion-cut``, ``band-order``, ``tile``, ...), each with its figures in ``data``.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import islpy as isl

from ..ir.contraction import contraction_form
from ..ir.expr import Binary, Const, Expr
from ..ir.printer import expr_to_str
from ..ir.program import Program
from ..pipeline.decisions import Decision, under
from .dependences import Dependences
from .legality import IllegalScheduleError, prove_legal
from .locality import dominant_streams, strided_streams
from .loop_ast import Block, For, If, Node, build_loop_ast, enclosing_loops, guarded_in_innermost
from .loop_work import Range, trip_count
from .pluto import SchedulingError, pluto_schedule
from .reuse import Reuse, reuse_exceeding
from .schedule import Alternative, Schedule, original_schedule
from .tiling import cache_sizes, tile_schedule
from .time_tiles import side_by_side_condition, spanning_band, tile_sides, tiles_side_by_side, time_tiles

log = logging.getLogger("polytri.schedule")

#: A schedule, the decisions that chose it, and its loop AST.
Chosen = tuple[Schedule, list[Decision], Node]


@dataclass(frozen=True)
class Reason:
    """Why ``auto`` keeps the input order: a ``code`` (the ``reason`` of the decision), the sentence, the
    figures."""

    code: str
    text: str
    data: Mapping[str, Any] = field(default_factory=dict)


def _original_order(prog: Program, reason: str, why: str, **data: Any) -> Decision:
    """The decision to run the input order, for ``reason`` (``option``, ``scheduler-error``, or a
    :attr:`Reason.code`)."""
    text = ("schedule: the original order (option schedule='original')" if reason == "option"
            else f"schedule: the original order, because {why}")
    return Decision("schedule", "original-order", prog.name, text, {"reason": reason, **data})


def choose_schedule(prog: Program, deps: Dependences, kind: str, fuse: str,
                    tile: bool | None = False, tile_size: int | None = None,
                    *, vector_loops: bool = False, packed: frozenset[str] = frozenset()
                    ) -> Chosen:
    """The schedule to generate code from, proved legal, with the decisions and its loop AST; the original
    order when the scheduler fails or its result cannot be proved legal (with a warning: never wrong
    code).  ``vector_loops``: the target vectorizes innermost loops (the CPU), so ``auto`` also keeps the
    input order where Pluto's schedule guards an innermost loop on its own counter (on GPUs such a guard
    is a mask).  ``packed``: statements the target blocks for its caches itself (the cpu micro-kernel's
    contractions): their reuse does not make ``auto`` tile."""
    original = original_schedule(prog, deps)
    prove_legal(original.map, deps, what=f"{prog.name}: the original order")
    if kind == "original":
        return original, [_original_order(prog, "option", "")], build_loop_ast(prog, original, deps)
    if prog.domain.is_empty():  # no instance runs (bounds that meet nowhere): nothing to schedule
        return original, [_original_order(prog, "empty", "no statement instance runs")], \
            build_loop_ast(prog, original, deps)
    try:
        sched = pluto_schedule(prog, deps, fuse=fuse)
        prove_legal(sched.map, deps, what=f"{prog.name}: the Pluto schedule")
    except (SchedulingError, IllegalScheduleError, isl.Error) as exc:
        warnings.warn(f"polytri: {exc}; compiling {prog.name} in its original order", stacklevel=3)
        log.warning("%s: falling back to the original order: %s", prog.name, exc)
        return original, [_original_order(prog, "scheduler-error", str(exc), error=type(exc).__name__)], \
            build_loop_ast(prog, original, deps)
    untiled = sched
    dropped: list[Decision] = []
    if ((tile is True or (tile is None and kind == "auto" and _tiling_may_pay(original, untiled)))
            and any(b.width >= 2 for b in sched.bands)):
        try:
            tiled = tile_schedule(prog, sched, deps, size=tile_size)
            prove_legal(tiled.map, deps, what=f"{prog.name}: the tiled schedule")
            sched = tiled
        except (IllegalScheduleError, isl.Error) as exc:
            warnings.warn(f"polytri: {exc}; compiling {prog.name} untiled", stacklevel=3)
            log.warning("%s: tiling dropped: %s", prog.name, exc)
            dropped.append(Decision("schedule", "tiling-dropped", prog.name, f"tiling: dropped, because {exc}",
                                    {"error": type(exc).__name__}))
        if tile is None and sched is not untiled and not _tiling_pays(original, untiled, sched):
            sched = untiled
    decisions = [under(d, "schedule", "scheduler: ") for d in sched.decisions] + dropped
    ours = build_loop_ast(prog, sched, deps, separate_guards=vector_loops)
    pluto = Decision("schedule", "pluto", prog.name, f"schedule: Pluto (fusion '{fuse}'), proved legal with isl",
                     {"fuse": fuse, "origin": sched.origin})
    chosen: Chosen = (sched, [pluto] + decisions, ours)
    if kind != "auto":
        return chosen
    theirs = build_loop_ast(prog, original, deps, separate_guards=vector_loops)
    why = (_parallelism_lost(prog, ours, theirs) or _locality_loss(prog, untiled, original)
           or (_vector_loops_guarded(ours, theirs) if vector_loops else None))
    if why is not None:
        log.info("%s: %s", prog.name, why.text)
        chosen = (original, [_original_order(prog, why.code, why.text, **why.data)] + decisions, theirs)
    if tile is not None:
        return chosen
    return _second_version(prog, deps, untiled, chosen, why, tile_size, vector_loops, packed)


def _second_version(prog: Program, deps: Dependences, untiled: Schedule, chosen: Chosen, why: Reason | None,
                    tile_size: int | None, vector_loops: bool, packed: frozenset[str]) -> Chosen:
    """The default's (``tile=None``) ``chosen`` schedule with the version it may carry beside it: time
    tiles around the input order where it was kept because Pluto lost the parallel loops (``why``, on the
    CPU), Pluto's tiles where Pluto's untiled schedule was chosen, the untiled schedule where its tiles
    were; each picked at run time (by size or by tile count)."""
    if why is not None:
        return (_time_tiled(prog, deps, untiled, chosen, tile_size)
                if why.code == "parallelism-lost" and vector_loops else chosen)
    if chosen[0] is untiled:
        return _tiled_where_reuse_exceeds_cache(prog, deps, untiled, chosen, tile_size, vector_loops, packed)
    return _wavefront_where_tiles_run_side_by_side(prog, deps, untiled, chosen, vector_loops, packed)


def _tiled_where_reuse_exceeds_cache(prog: Program, deps: Dependences, untiled: Schedule,
                                     chosen: Chosen, tile_size: int | None,
                                     vector_loops: bool, packed: frozenset[str]) -> Chosen:
    """``chosen``, or, where a loop of its AST carries reuse (:mod:`.reuse`), an AST that runs the tiled
    Pluto schedule when what one iteration of such a loop touches exceeds the L2 cache at the sizes of
    the call, and ``chosen``'s otherwise.  Both are proved legal; the choice is made by the kernel.  Only
    where ``chosen`` is Pluto's schedule: where the input order was kept (Pluto's untiled schedule lost its
    parallel loops), the tiles' wavefront gave them back at a cost: jacobi-2d ran 1.34x slower tiled at
    PolyBench's LARGE size on two threads (fdtd-2d 1.33x faster, heat-3d 1.09x).  Not where the tiled AST
    runs some statement with its outermost parallel loop deeper than ``chosen`` (:func:`_parallelism_lost`):
    a wavefront over tiles in place of a parallel loop.  The decision: kind ``tile-by-size``, with the
    ``l2`` size, the ``reuse`` found (:class:`.reuse.Reuse`) and the two schedules' origins; the schedule
    names the tiled one as its :class:`.Alternative` (condition ``size``)."""
    sched, _, ast = chosen
    if not any(b.width >= 2 for b in untiled.bands):
        return chosen
    l2 = cache_sizes()[2]
    found = reuse_exceeding(prog, ast, l2, blocked=_packed_contractions(prog) | packed)
    if found is None:
        return chosen
    try:
        tiled = tile_schedule(prog, untiled, deps, size=tile_size)
        prove_legal(tiled.map, deps, what=f"{prog.name}: the tiled schedule")
    except (IllegalScheduleError, isl.Error) as exc:
        log.info("%s: no tiled version: %s", prog.name, exc)
        return chosen
    tiled_ast = build_loop_ast(prog, tiled, deps)   # unsplit: cheaper, and splitting keeps the loops' flags
    lost = _parallelism_lost(prog, tiled_ast, ast)
    if lost is not None:   # gramschmidt: the tiles' wavefront runs fewer loops in parallel
        log.info("%s: no tiled version, because %s", prog.name, lost.text.replace("the Pluto schedule", "the tiled one"))
        return chosen
    if vector_loops:
        tiled_ast = build_loop_ast(prog, tiled, deps, separate_guards=True)
    return _by_size(prog, chosen, tiled, tiled_ast, found, l2,
                    f"the {tiled.origin} schedule runs", f"the {sched.origin} one otherwise")


def _by_size(prog: Program, chosen: Chosen, tiled: Schedule, tiled_ast: Node, found: tuple[Expr, list[Reuse]],
             l2: int, runs: str, otherwise: str, shown: Sequence[Decision] = ()) -> Chosen:
    """``chosen`` carrying ``tiled`` as its :class:`.Alternative` (condition ``size``): the AST runs
    ``tiled_ast`` where ``found``'s test holds at the sizes of the call (some loop's reuse exceeds the L2
    cache), ``chosen``'s otherwise.  The decision: kind ``tile-by-size``, with the ``l2`` size, the
    ``reuse`` found (:class:`.reuse.Reuse`) and the two schedules' origins, after ``shown``."""
    sched, decisions, ast = chosen
    cond, reuse = found
    why = Decision("schedule", "tile-by-size", prog.name,
                   f"tiling: {runs} where the data one iteration of a loop rereads exceed the L2 cache "
                   f"({l2 >> 10} KiB), {otherwise}: " + "; ".join(r.text() for r in reuse),
                   {"l2": l2, "reuse": tuple(reuse), "tiled": tiled.origin, "untiled": sched.origin})
    log.info("%s: %s", prog.name, why)
    both = replace(sched, alternative=Alternative(tiled.origin, "size", tiled.decisions))
    return both, decisions + list(shown) + [why], If(cond, tiled_ast, ast)


def _time_tiled(prog: Program, deps: Dependences, pluto: Schedule, chosen: Chosen, tile_size: int | None) -> Chosen:
    """``chosen`` (the input order, kept because Pluto's skewed schedule lost its parallel loops: the
    stencils), or an AST that runs the input order in time tiles of Pluto's band (:mod:`.time_tiles`: the
    tiles' locality and parallelism, the input order's vector loops) where they pay at the sizes of the
    call, ``chosen``'s otherwise: for a 2-D stencil, where a loop of its AST carries reuse that exceeds
    the L2 cache, by :func:`_by_size` (``data["tiled"] == "time-tiled"``); for a 1-D stencil, where its
    rows make two tiles or more and its time loop two tile heights (:func:`.time_tiles.tiles_side_by_side`:
    a wavefront of two tiles side by side), by :func:`_time_tiles_by_count`.  On the CPU only
    (``vector_loops``): the GPU's schedules are not tiled by size."""
    sched, _, ast = chosen
    band = spanning_band(pluto)
    if band is None:
        return chosen
    l2 = cache_sizes()[2]
    found = reuse_exceeding(prog, ast, l2) if band.width == 3 else None
    counts = tiles_side_by_side(ast, (tile_size, tile_size) if tile_size else tile_sides(band)) \
        if band.width == 2 else None
    if found is None and counts is None:
        return chosen
    try:
        tiled = time_tiles(sched, pluto, deps, size=tile_size)
        if tiled is None:
            return chosen
        prove_legal(tiled.map, deps, what=f"{prog.name}: the time-tiled schedule")
    except (IllegalScheduleError, isl.Error) as exc:
        log.info("%s: no time-tiled version: %s", prog.name, exc)
        return chosen
    tiled_ast = build_loop_ast(prog, tiled, deps, separate_guards=True)
    shown = [under(d, "schedule", "scheduler: ") for d in tiled.decisions]
    if counts is not None:
        return _time_tiles_by_count(prog, chosen, tiled, tiled_ast, counts, shown)
    assert found is not None
    return _by_size(prog, chosen, tiled, tiled_ast, found, l2, "the input order runs in time tiles",
                    "untiled otherwise", shown)


def _time_tiles_by_count(prog: Program, chosen: Chosen, tiled: Schedule, tiled_ast: Node,
                         counts: list[tuple[str, Expr, int]], shown: Sequence[Decision]) -> Chosen:
    """``chosen`` carrying the time-tiled schedule ``tiled`` as its :class:`.Alternative` (condition
    ``tile-count``): the AST runs ``tiled_ast`` where every test of ``counts``
    (:func:`.time_tiles.tiles_side_by_side`) holds at the sizes of the call, ``chosen``'s otherwise.  The
    decision: kind ``time-tile-by-count``, with the tests (``trips``: each loop's counter, the bound of
    its trip count, the least count) and the two schedules' origins, after ``shown``."""
    sched, decisions, ast = chosen
    why = Decision("schedule", "time-tile-by-count", prog.name,
                   "tiling: the input order runs in time tiles where a wavefront runs two of them side by side ("
                   + ", ".join(f"{var}: {expr_to_str(t)} >= {least}" for var, t, least in counts)
                   + "), untiled otherwise: each time step's parallel loop is too short to pay for a parallel "
                   "region; the wavefront opens one region per wavefront of tiles",
                   {"trips": tuple(counts), "tiled": tiled.origin, "untiled": sched.origin})
    log.info("%s: %s", prog.name, why)
    both = replace(sched, alternative=Alternative(tiled.origin, "tile-count", tiled.decisions))
    return both, decisions + list(shown) + [why], If(side_by_side_condition(counts), tiled_ast, ast)


def _wavefront_where_tiles_run_side_by_side(prog: Program, deps: Dependences, untiled: Schedule,
                                            chosen: Chosen, vector_loops: bool, packed: frozenset[str]) -> Chosen:
    """``chosen`` (a wavefront over tiles, kept because it is the only source of parallelism:
    :func:`_tiling_pays`), run only where its parallel loops can have two tiles at once or where the
    untiled schedule's reuse outgrows the L2 cache (:mod:`.reuse`: the tiles' locality), and the untiled
    Pluto schedule otherwise.  The bound is an upper bound of each outermost parallel loop's trip count
    (:func:`.loop_work.trip_count`) in the parameters.  floyd-warshall at PolyBench's MEDIUM size (N = 500)
    has one tile of 512 columns per row of tiles: its wavefront never runs two tiles side by side, and
    the default ran at 0.82x the speed of the input order's C; with the untiled schedule there (its input
    order), 1.00x (``polytri bench --dataset medium``, quiet runs before and after).  The decision: kind
    ``tile-by-count``, with the bounds (``trips``: each loop's counter and its bound), the ``l2`` size, the
    ``reuse`` found (none: ``()``) and the untiled schedule's origin; the schedule names the untiled one
    as its :class:`.Alternative` (condition ``tile-count``)."""
    sched, decisions, ast = chosen
    try:
        trips = _parallel_trips(ast, {})
    except _Unbounded:   # a loop without an affine bound: the tiles stay
        return chosen
    if not trips:
        return chosen
    cond: Expr = Binary(">=", trips[0][1], Const(2))
    for _, trip in trips[1:]:
        cond = Binary("or", cond, Binary(">=", trip, Const(2)))
    untiled_ast = build_loop_ast(prog, untiled, deps, separate_guards=vector_loops)
    l2 = cache_sizes()[2]
    found = reuse_exceeding(prog, untiled_ast, l2, blocked=_packed_contractions(prog) | packed)
    reuse = ""
    if found is not None:
        cond = Binary("or", cond, found[0])
        reuse = f", or where the data one iteration of a loop rereads exceed the L2 cache ({l2 >> 10} KiB: " \
            + "; ".join(r.text() for r in found[1]) + ")"
    why = Decision("schedule", "tile-by-count", prog.name,
                   "tiling: the wavefront over tiles runs where some parallel loop has two tiles or more ("
                   + ", ".join(f"{var}: at most {expr_to_str(t)}" for var, t in trips) + f"){reuse}, the untiled "
                   + f"{untiled.origin} schedule otherwise: one tile at a time only adds loop overhead",
                   {"trips": tuple(trips), "l2": l2, "reuse": tuple(found[1]) if found is not None else (),
                    "untiled": untiled.origin})
    log.info("%s: %s", prog.name, why)
    both = replace(sched, alternative=Alternative(untiled.origin, "tile-count", untiled.decisions))
    return both, decisions + [why], If(cond, ast, untiled_ast)


def _parallel_trips(n: Node, ranges: dict[str, Range]) -> list[tuple[str, Expr]]:
    """Each outermost parallel loop of ``n`` with an upper bound of its trip count in the parameters.
    Raises :class:`_Unbounded` where some loop on the way has no affine bound (a parallel loop left
    uncounted could have many tiles)."""
    if isinstance(n, For):
        trip = trip_count(n, ranges)
        if trip is None:
            raise _Unbounded
        if n.parallel:
            return [(n.var, trip[0])]
        return _parallel_trips(n.body, {**ranges, n.var: trip[1]})
    if isinstance(n, Block):
        return [t for c in n.body for t in _parallel_trips(c, ranges)]
    if isinstance(n, If):
        return _parallel_trips(n.then, ranges) + (_parallel_trips(n.orelse, ranges) if n.orelse is not None else [])
    return []


class _Unbounded(Exception):
    """A loop whose trip count has no affine bound (:func:`_parallel_trips`)."""


def _parallelism_lost(prog: Program, ours: Node, theirs: Node) -> Reason | None:
    """Why the loop AST ``ours`` runs some statement with its outermost parallel loop deeper than the
    input order's AST ``theirs`` does (or with none where the input order has one), or ``None``.  A skewed
    band pays off only through tiling with wavefronts; untiled (or where tiling does not pay yet, see
    _tiling_pays) a skew just removes the input order's parallelism.  (Counting parallel loops instead
    would reject fusing a 4 x 4 nest into one loop of 16 iterations.)  A statement whose parallel loop
    moved innermost where the input order's innermost loop is sequential does not count: the move made
    that loop vectorizable (doitgen's sums: ``pp`` innermost instead of the reduction over ``s``).  Code
    ``parallelism-lost``; ``data["loops"]``: for each group of statements, its outermost parallel loop in
    each (depths from 0; ``None``: Pluto's has none)."""
    def first_parallel(places: list[tuple[bool, ...]]) -> float:
        return max(next((k for k, par in enumerate(p) if par), math.inf) for p in places)
    def innermost_parallel(places: list[tuple[bool, ...]]) -> bool:
        return all(p and p[-1] for p in places)
    loops_ours, loops_theirs = enclosing_loops(ours), enclosing_loops(theirs)
    mine = {n: first_parallel(p) for n, p in loops_ours.items()}
    base = {n: first_parallel(p) for n, p in loops_theirs.items()}
    worse: dict[tuple[float, float], list[str]] = {}
    for s in prog.statements:
        if s.name in mine and s.name in base and mine[s.name] > base[s.name] and not (
                math.isfinite(mine[s.name]) and innermost_parallel(loops_ours[s.name])
                and not innermost_parallel(loops_theirs[s.name])):
            worse.setdefault((mine[s.name], base[s.name]), []).append(s.name)
    if not worse:
        return None
    return Reason("parallelism-lost",
                  "the input order has parallel loops further out than the Pluto schedule: its outermost parallel "
                  "loop is " + "; ".join(_parallel_depths(names, p, b) for (p, b), names in worse.items())
                  + " (loops counted from the outermost); the input order is kept",
                  {"loops": tuple({"statements": tuple(names), "pluto": None if math.isinf(p) else int(p),
                                   "original": int(b)} for (p, b), names in worse.items())})


def _vector_loops_guarded(ours: Node, theirs: Node) -> Reason | None:
    """Why the loop AST ``ours`` runs statements behind a guard on an innermost loop's counter where the
    input order's AST ``theirs`` does not (:func:`.guarded_in_innermost`), or ``None``.  Pluto fuses a
    statement of a lower dimension into a loop of a higher one (durbin's ``y[k] = alpha`` into the loop of
    ``z[i] = ...``) when that shortens a dependence; the point guard it needs then stops the loop from
    vectorizing, which here cost more than the fusion saved (0.82-0.87x the input order's time).  Code
    ``guarded-vector-loop``; ``data["statements"]``: the statements guarded."""
    guarded = guarded_in_innermost(ours) - guarded_in_innermost(theirs)
    if not guarded:
        return None
    return Reason("guarded-vector-loop",
                  f"the Pluto schedule runs {', '.join(sorted(guarded))} behind a guard on an innermost loop's "
                  "counter, which keeps that loop from vectorizing; the input order does not: it is kept",
                  {"statements": tuple(sorted(guarded))})


def _packed_contractions(prog: Program) -> frozenset[str]:
    """The statements of contraction form over a rectangular domain: the cpu target's micro-kernel packs
    their operands into panels that fit its caches (gemm tiled ran as fast as untiled), so their reuse is
    not a reason to tile."""
    return frozenset(st.name for st in prog.statements if contraction_form(st) is not None and st.domain.is_box())


def _parallel_depths(names: list[str], pluto: float, original: float) -> str:
    """``loop 2 of S0, S1, where the Pluto schedule has none`` (``pluto`` is ``inf`` for none); depths count
    from 0, the text from 1."""
    theirs = "has none" if math.isinf(pluto) else f"runs loop {int(pluto) + 1} in parallel"
    return f"loop {int(original) + 1} of {', '.join(names)}, where the Pluto schedule {theirs}"


def _locality_loss(prog: Program, pluto: Schedule, original: Schedule) -> Reason | None:
    """Why the Pluto schedule's innermost loops have clearly worse spatial locality than the input order,
    or ``None``.  Pluto's cost function sees dependence distances, not memory layout: to fuse bicg's
    ``s[j] += r[i] * A[i, j]`` with ``q[i] += A[i, j] * p[j]`` under an outer parallel loop it scans the
    first on ``(j, i)``, a column walk of ``A`` that loads a cache line per element (3x slower than the
    naive row walk here, which two cores of parallelism cannot repay).  Clearly worse means more strided
    streams (``locality.strided_streams``: accesses shared by fused statements count once) in the deepest
    statements that have any, whose ``n^depth`` iterations dominate the cost.  Code ``locality-lost``;
    ``data``: the ``depth``, the ``strided`` streams of Pluto's schedule and those of the ``original``."""
    ours = list(strided_streams(prog, pluto.map).values())
    theirs = list(strided_streams(prog, original.map).values())
    depth = max((s.depth for s in ours + theirs), default=0)
    worse, before = dominant_streams(ours, depth), dominant_streams(theirs, depth)
    if len(worse) <= len(before):
        return None
    listed = f" ({', '.join(before)})" if before else ""
    return Reason("locality-lost",
                  f"the Pluto schedule's innermost loops walk {len(worse)} strided stream(s) in statements {depth} "
                  f"loop(s) deep ({', '.join(worse)}), the input order {len(before)}{listed}: a strided walk loads "
                  f"a cache line per element; the input order is kept",
                  {"depth": depth, "strided": tuple(worse), "original": tuple(before)})


def _tiling_may_pay(original: Schedule, untiled: Schedule) -> bool:
    """Whether :func:`_tiling_pays` can hold whatever the tiled schedule: a default (``tile=None``)
    schedule is tiled only then (tiling adi's schedule took 0.4 s of a 2.4 s compile, to be dropped)."""
    return parallel_loops(original) == 0 and parallel_loops(untiled) == 0


def _tiling_pays(original: Schedule, untiled: Schedule, tiled: Schedule) -> bool:
    """The default (``tile=None``) tiles only where tiling is the sole source of parallelism: neither the
    input order nor the untiled schedule has a parallel loop, and the wavefront over tiles gives one
    (seidel-like sweeps: 1.66x on seidel-2d here).  Elsewhere the measured gains of the current tile
    sizes are within this machine's noise or negative (docs/scheduler.md), so tiling waits for issue 4."""
    return _tiling_may_pay(original, untiled) and parallel_loops(tiled) > 0


def parallel_loops(s: Schedule) -> int:
    """Number of loop (non-scalar) time dimensions that carry no dependence."""
    return sum(1 for d, par in enumerate(s.parallel) if par and not (d < len(s.scalar) and s.scalar[d]))
