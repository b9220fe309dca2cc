"""Schedules: maps from statement instances to one common, lexicographically ordered time space.

A :class:`Schedule` also records which time dimensions are parallel (carry no dependence), so the code
generators can put ``omp parallel for``, ``omp simd`` or a GPU grid on them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import islpy as isl

from ..ir.program import Program
from ..pipeline.decisions import Decision
from .dependences import Dependences

log = logging.getLogger("polytri.schedule")


@dataclass(frozen=True)
class Band:
    """Consecutive loop dimensions that are permutable (every dependence not carried by an outer band is
    non-negative along each of them): the band can be tiled."""

    first: int
    """Index of the band's first time dimension."""
    width: int
    """Number of dimensions."""

    @property
    def dims(self) -> range:
        return range(self.first, self.first + self.width)


#: What decides between a schedule and its :class:`Alternative`, as ``explain()`` names it.
CONDITIONS = {"size": "by size", "tile-count": "by tile count"}


@dataclass(frozen=True)
class Alternative:
    """A second schedule that a kernel's loop AST carries beside the schedule's own map: the AST is an ``If``
    whose test, evaluated from the parameters at each call, picks one of the two."""

    origin: str
    """Which pass produced it (``pluto``, ``pluto+tiled``)."""
    condition: str
    """What picks it (a key of :data:`CONDITIONS`): ``size``, the alternative (tiled) runs where the data
    one iteration of a loop rereads exceed the L2 cache; ``tile-count``, the alternative (untiled) runs
    where no parallel loop of the schedule's own wavefront over tiles has two tiles or more, and the
    untiled schedule's reuse fits the L2 cache, or, for a 1-D stencil's input order, the alternative
    (time-tiled) runs where its wavefront has two tiles side by side."""
    decisions: tuple[Decision, ...] = ()
    """What the scheduler decided for it, all of it (the decisions it shares with the schedule's own map
    are in ``Schedule.decisions`` too)."""


@dataclass(frozen=True)
class Schedule:
    """A statement-wise affine schedule with per-dimension facts."""

    map: isl.UnionMap
    """``{ S[i] -> [t0, t1, ...] }`` for every statement, one common time space."""
    parallel: tuple[bool, ...]
    """For each time dimension: ``True`` when no dependence is carried by it."""
    origin: str
    """Which pass produced ``map`` (``original`` for the input order, ``pluto`` for the scheduler,
    ``pluto+tiled`` for its tiles); :attr:`label` also names the alternative."""
    bands: tuple[Band, ...] = ()
    """Permutable bands (empty for the original order)."""
    scalar: tuple[bool, ...] = ()
    """For each time dimension: a constant per statement (a distribution), not a loop."""
    decisions: tuple[Decision, ...] = ()
    """What the scheduler decided and why (cuts, lazy hyperplanes, band orders, tiles), as records of stage
    ``schedule``."""
    rows: tuple[dict[str, str], ...] = ()
    """Each time dimension as text per statement (``{"S0": "t", "S1": "t"}``), for reports."""
    tiled: bool = False
    """Whether ``map`` has tile dimensions (:func:`polytri.schedule.tiling.tile_band`)."""
    alternative: Alternative | None = None
    """The second schedule the kernel's loop AST carries, if any (``schedule/choose.py``)."""

    @property
    def ndim(self) -> int:
        return len(self.parallel)

    @property
    def label(self) -> str:
        """The origin for reports: ``pluto``, or with an alternative ``pluto/pluto+tiled by size``."""
        alt = self.alternative
        return self.origin if alt is None else f"{self.origin}/{alt.origin} {CONDITIONS[alt.condition]}"


def map_text(umap: isl.UnionMap, order: Sequence[str] = ()) -> list[str]:
    """isl's text of ``umap`` as lines, one map per line when there are several, ordered by the statements
    they map from (then to) in ``order`` (program order); names not in ``order`` follow, numbers in them
    compared as numbers (``S2`` before ``S10``).  The lines still parse back to ``umap``."""
    maps: list[isl.Map] = []
    umap.foreach_map(maps.append)
    if len(maps) < 2:
        return [str(umap)]
    rank = {name: k for k, name in enumerate(order)}

    def key(name: str | None) -> tuple[int, tuple[tuple[int, str], ...]]:
        if name is None:
            return (-1, ())
        if name in rank:
            return (rank[name], ())
        parts = re.split(r"(\d+)", name)
        return (len(rank), tuple((int(p), "") if p.isdigit() else (-1, p) for p in parts if p))

    def name(m: isl.Map, t: isl.dim_type) -> str | None:
        return m.get_tuple_name(t) if m.has_tuple_name(t) else None

    texts = []
    head = ""
    for m in sorted(maps, key=lambda m: (key(name(m, isl.dim_type.in_)), key(name(m, isl.dim_type.out)))):
        text = str(m)
        start, end = text.index("{"), text.rindex("}")
        head = text[:start]
        texts.append(text[start + 1:end].strip())
    return [head + "{"] + [f"  {t}{';' if k < len(texts) - 1 else ''}" for k, t in enumerate(texts)] + ["}"]


def time_dependences(schedule: isl.UnionMap, deps: isl.UnionMap) -> isl.Map | None:
    """Dependences mapped to time: ``{ [t] -> [t'] }`` (``None`` when there are none)."""
    t = deps.apply_domain(schedule).apply_range(schedule)
    if t.is_empty():
        return None
    maps: list[isl.Map] = []
    t.foreach_map(maps.append)
    out = maps[0]
    for m in maps[1:]:
        out = out.union(m)
    return out


def _equal_prefix(space: isl.Space, k: int) -> isl.Map:
    """``{ [t] -> [t'] : t_d = t'_d for d < k }``."""
    m = isl.Map.universe(space)
    for d in range(k):
        m = m.equate(isl.dim_type.in_, d, isl.dim_type.out, d)
    return m


def parallel_dimensions(schedule: isl.UnionMap, deps: Dependences) -> tuple[bool, ...]:
    """For each time dimension, whether it carries no dependence of ``deps``."""
    ndim = _time_width(schedule)
    tdeps = time_dependences(schedule, deps.all)
    if tdeps is None:
        return (True,) * ndim
    return tuple(not carries(tdeps, k) for k in range(ndim))


def within_loop(tdeps: isl.Map, k: int) -> isl.Map:
    """The time dependences equal before dimension ``k``: those between instances of one execution of the
    loop that scans dimension ``k``."""
    return tdeps.intersect(_equal_prefix(tdeps.get_space(), k))


def carried_at(tdeps: isl.Map, k: int) -> isl.Map:
    """The time dependences equal before dimension ``k`` that differ at ``k``: those ``k`` carries."""
    space = tdeps.get_space()
    return tdeps.intersect(_equal_prefix(space, k)).subtract(_equal_prefix(space, k + 1))


def carries(tdeps: isl.Map, k: int) -> bool:
    """Whether :func:`carried_at` is not empty: equal before ``k``, unequal at ``k`` (two intersections,
    cheaper than the difference of maps with many disjuncts)."""
    same = within_loop(tdeps, k)
    return not (same.order_lt(isl.dim_type.in_, k, isl.dim_type.out, k).is_empty()
                and same.order_gt(isl.dim_type.in_, k, isl.dim_type.out, k).is_empty())


def _time_width(schedule: isl.UnionMap) -> int:
    widths: set[int] = set()
    schedule.foreach_map(lambda m: widths.add(m.dim(isl.dim_type.out)))
    if len(widths) > 1:
        raise ValueError(f"schedule maps to time spaces of different widths {sorted(widths)}")
    return widths.pop() if widths else 0


def dependences_between(deps: isl.UnionMap, keep: Callable[[str, str], bool]) -> isl.UnionMap:
    """The maps of ``deps`` whose (source, target) statement names ``keep`` accepts."""
    out = isl.UnionMap.empty(deps.get_space())
    maps: list[isl.Map] = []
    deps.foreach_map(maps.append)
    for m in maps:
        if keep(m.get_tuple_name(isl.dim_type.in_), m.get_tuple_name(isl.dim_type.out)):
            out = out.union(isl.UnionMap.from_map(m))
    return out


def loop_is_parallel(schedule: isl.UnionMap, deps: Dependences, dim: int, statements: frozenset[str]) -> bool:
    """Whether a loop scanning time dimension ``dim`` over ``statements`` carries no dependence among
    them.  Finer than :func:`parallel_dimensions`: distributed nests share time dimensions, and one
    nest's reduction must not make another nest's loop sequential."""
    return loops_are_parallel(schedule, deps, [dim], statements)[dim]


def loops_are_parallel(schedule: isl.UnionMap, deps: Dependences, dims: Sequence[int],
                       statements: frozenset[str]) -> dict[int, bool]:
    """:func:`loop_is_parallel` for several time dimensions (the time dependences are computed once)."""
    inside = dependences_between(deps.all, lambda a, b: a in statements and b in statements)
    tdeps = time_dependences(schedule, inside)
    return {d: tdeps is None or not carries(tdeps, d) for d in dims}


def original_schedule(program: Program, deps: Dependences) -> Schedule:
    """The input order as a :class:`Schedule`, with its parallel dimensions."""
    sched = program.schedule
    par = parallel_dimensions(sched, deps)
    scalar = tuple(k % 2 == 0 for k in range(len(par)))
    log.info("%s: original order, parallel time dimensions %s", program.name,
             [k for k, p in enumerate(par) if p and k % 2 == 1])
    return Schedule(sched, par, "original", scalar=scalar)
