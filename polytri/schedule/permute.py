"""Permuting the dimensions of a permutable band: parallel loops outward (for GPU grids).

Every order of a band's dimensions is legal (that is what permutable means), so the order is a choice of
the target: the CPU wants a stride-1 parallel loop innermost (Pluto's intra-tile order, see
:func:`polytri.schedule.band_order.reorder_bands`); a GPU wants as many parallel loops as possible on the
outside, where they become grid and block dimensions (PPCG's choice).  A dimension keeps its parallelism
when moved outward only if no dependence it used to see as satisfied by an outer band dimension
remains, so each candidate order is checked by recomputing the parallel dimensions, and the result is
proved legal again by the caller.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import islpy as isl

from ..pipeline.decisions import Decision
from .dependences import Dependences
from .schedule import Schedule, parallel_dimensions

log = logging.getLogger("polytri.schedule")


def _reorder(n: int, order: list[int]) -> isl.Map:
    """``{ [t0, ..., t(n-1)] -> [t(order[0]), ...] }``."""
    src = ", ".join(f"t{i}" for i in range(n))
    return isl.Map(f"{{ [{src}] -> [{', '.join(f't{i}' for i in order)}] }}")


def permute_dimensions(schedule: Schedule, order: list[int], deps: Dependences) -> Schedule:
    """``schedule`` with time dimension ``order[k]`` moved to position ``k``."""
    new_map = schedule.map.apply_range(isl.UnionMap.from_map(_reorder(schedule.ndim, order)))
    rows = tuple(schedule.rows[i] for i in order) if schedule.rows else ()
    scalar = tuple(schedule.scalar[i] for i in order) if schedule.scalar else ()
    return replace(schedule, map=new_map, parallel=parallel_dimensions(new_map, deps), rows=rows, scalar=scalar)


def permute_nest(schedule: Schedule, statements: frozenset[str], order: list[int], deps: Dependences) -> Schedule:
    """``schedule`` with time dimension ``order[k]`` moved to position ``k`` for ``statements`` only (one
    nest of a distributed schedule: the other statements keep their dimensions).  Unlike a band's
    permutation this one can break dependences between the nest and the rest: the caller checks legality."""
    n = schedule.ndim
    perm = _reorder(n, order)
    maps: list[isl.Map] = []
    schedule.map.foreach_map(lambda m: maps.append(m.apply_range(perm) if m.get_tuple_name(isl.dim_type.in_)
                                                   in statements else m))
    new_map = isl.UnionMap.from_map(maps[0])
    for m in maps[1:]:
        new_map = new_map.union(isl.UnionMap.from_map(m))
    rows = tuple({st: (row_k[st] if st in statements else row_d[st]) for st in row_d}
                 for row_d, row_k in ((schedule.rows[d], schedule.rows[order[d]]) for d in range(n))
                 ) if schedule.rows else ()
    return replace(schedule, map=new_map, parallel=parallel_dimensions(new_map, deps), rows=rows, bands=())


def _leading_parallel(s: Schedule, dims: range) -> int:
    count = 0
    for d in dims:
        if not s.parallel[d]:
            break
        count += 1
    return count


def parallel_outward(schedule: Schedule, deps: Dependences) -> Schedule:
    """Within each band, move parallel dimensions outward where they stay parallel (a decision of kind
    ``permute`` for each band reordered)."""
    for number, band in enumerate(schedule.bands):
        if band.width < 2:
            continue
        dims = list(band.dims)
        before = _leading_parallel(schedule, band.dims)
        ranked = sorted(dims, key=lambda d: not schedule.parallel[d])
        if ranked == dims:
            continue
        order = list(range(schedule.ndim))
        order[band.first:band.first + band.width] = ranked
        trial = permute_dimensions(schedule, order, deps)
        after = _leading_parallel(trial, band.dims)
        if after > before:
            why = Decision("schedule", "permute", f"band {number}",
                           f"band {number}: dimensions reordered {dims} -> {ranked} for the GPU grid: {after} "
                           f"outermost parallel loop(s) instead of {before}",
                           {"band": number, "order": tuple(ranked), "parallel": after, "previous_parallel": before})
            log.info("%s", why)
            schedule = replace(trial, decisions=schedule.decisions + (why,))
    return schedule
