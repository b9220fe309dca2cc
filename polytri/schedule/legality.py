"""The legality proof, independent of the scheduler: under a schedule, every dependence must go forward.

A schedule is legal when, for every dependence ``s -> t`` (flow, anti or output, computed on the original
program), the time of ``t`` is lexicographically greater than the time of ``s``.  isl decides this
exactly: the dependences mapped to time must be a subset of the strict lexicographic order.  A
violation comes with an example pair of instances.
"""

from __future__ import annotations

import islpy as isl

from ..errors import PolytriError
from ..ir.islutil import maps
from .dependences import Dependences


class IllegalScheduleError(PolytriError):
    """A schedule that runs some dependence backwards (or at the same time)."""


def violations(schedule: isl.UnionMap, deps: Dependences) -> isl.UnionMap:
    """The dependences (pairs of statement instances) that ``schedule`` does not run in order: those
    whose target is not scheduled strictly after their source.  Only the pairs of statements joined by
    a dependence are compared (``{ S[s] -> T[t] : time(s) >=lex time(t) }`` for every pair would grow
    with the square of the statements)."""
    times = {m.get_tuple_name(isl.dim_type.in_): m for m in maps(schedule)}
    out = isl.UnionMap.empty(deps.all.get_space())
    for dep in maps(deps.all):
        src, dst = dep.get_tuple_name(isl.dim_type.in_), dep.get_tuple_name(isl.dim_type.out)
        not_after = times[src].lex_ge_map(times[dst])  # { s -> t : time(s) >=lex time(t) }
        bad = dep.intersect(not_after)
        if not bad.is_empty():
            out = out.union(isl.UnionMap.from_map(bad))
    return out.coalesce()


def is_legal(schedule: isl.UnionMap, deps: Dependences) -> bool:
    """Whether every dependence goes forward in time (source strictly before target); decided once per
    schedule and dependences (:attr:`.Dependences.verdicts`)."""
    key = str(schedule)
    verdict = deps.verdicts.get(key)
    if verdict is None:
        verdict = deps.verdicts[key] = violations(schedule, deps).is_empty()
    return verdict


def prove_legal(schedule: isl.UnionMap, deps: Dependences, *, what: str) -> None:
    """Raise :class:`IllegalScheduleError` with an example unless ``schedule`` is legal."""
    if is_legal(schedule, deps):
        return
    bad = violations(schedule, deps)
    example = bad.sample() if not bad.is_empty() else None
    raise IllegalScheduleError(f"{what}: the schedule violates dependences, for example {example}")
