"""The legality proof, independent of the scheduler: under a schedule, every dependence must go forward.

A schedule is legal when, for every dependence ``s -> t`` (flow, anti or output, computed on the original
program), the time of ``t`` is lexicographically greater than the time of ``s``.  isl decides this
exactly: the dependences mapped to time must be a subset of the strict lexicographic order.  A
violation comes with an example pair of instances.
"""

from __future__ import annotations

import islpy as isl

from ..errors import PolytriError
from .dependences import Dependences


class IllegalScheduleError(PolytriError):
    """A schedule that runs some dependence backwards (or at the same time)."""


def violations(schedule: isl.UnionMap, deps: Dependences) -> isl.UnionMap:
    """The dependences (pairs of statement instances) that ``schedule`` does not run in order: those
    whose target is not scheduled strictly after their source."""
    not_after = schedule.lex_ge_union_map(schedule)  # { s -> t : time(s) >=lex time(t) }
    return deps.all.intersect(not_after).coalesce()


def is_legal(schedule: isl.UnionMap, deps: Dependences) -> bool:
    """Whether every dependence goes forward in time (source strictly before target)."""
    return violations(schedule, deps).is_empty()


def prove_legal(schedule: isl.UnionMap, deps: Dependences, *, what: str) -> None:
    """Raise :class:`IllegalScheduleError` with an example unless ``schedule`` is legal."""
    if is_legal(schedule, deps):
        return
    bad = violations(schedule, deps)
    example = bad.sample() if not bad.is_empty() else None
    raise IllegalScheduleError(f"{what}: the schedule violates dependences, for example {example}")
