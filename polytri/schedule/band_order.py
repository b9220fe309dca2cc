"""The innermost row of each permutable band (Pluto's intra-tile loop order), chosen after the scheduler
has found its rows: for vectorization first, then spatial locality (:mod:`.locality`)."""

from __future__ import annotations

import logging
from typing import NamedTuple

from ..ir.program import Program
from ..pipeline.decisions import Decision
from .dependences import Dependences
from .locality import innermost_scores
from .rows import Row, union_map
from .schedule import Band, loops_are_parallel

log = logging.getLogger("polytri.schedule")


class _Candidate(NamedTuple):
    dim: int
    """The row moved innermost."""
    rows: list[Row]
    """The rows after the move."""
    vectorizable: bool
    """The innermost loop is then parallel, with a stride-1 access."""
    score: int
    """Its locality score."""
    first_parallel: int | None
    """The band's outermost parallel dimension after the move."""


def reorder_bands(program: Program, deps: Dependences, rows: list[Row], bands: list[Band],
                  fused_outer: Band | None, decisions: list[Decision]) -> list[Row]:
    """``rows`` with each band's innermost row chosen (legal: band rows are permutable); each move is
    appended to ``decisions`` (kind ``band-order``).  The choice: first a row whose loop is parallel with a stride-1 access (it
    vectorizes; a reduction innermost does not without reassociation), then the best spatial locality;
    never one whose move pushes the band's outermost parallel loop inward, unless the statements run
    inside shared parallel loops (policy ``outer``: a convolution's sums go outside its parallel column
    loop) or the move makes the innermost loop vectorizable below enclosing loops (:func:`_below_loops`).
    Below such shared loops the choice is made separately for each group of statements that earlier cuts
    placed in a nest of its own (one nest's reduction does not decide another's innermost loop);
    otherwise it is one choice for all statements, so that the time dimensions of distributed nests stay
    aligned (the GPU code generator hoists parallel dimensions by position)."""
    everyone = frozenset(s.name for s in program.statements)
    for number, band in enumerate(bands):
        if band.width < 2 or band is fused_outer:
            continue
        for group in (_placement_groups(program, rows, band.first) if fused_outer is not None else [everyone]):
            rows = _reorder_band(program, deps, rows, (number, band), group, fused_outer, decisions)
    return rows


def _placement_groups(program: Program, rows: list[Row], before: int) -> list[frozenset[str]]:
    """The statements grouped by the cuts among the first ``before`` rows (each group: one nest)."""
    groups: dict[tuple[int, ...], set[str]] = {}
    for st in program.statements:
        groups.setdefault(tuple(r.consts[st.name] for r in rows[:before] if r.scalar), set()).add(st.name)
    return [frozenset(g) for g in groups.values()]


def _moved_innermost(rows: list[Row], dim: int, last: int, group: frozenset[str]) -> list[Row]:
    """``rows`` with row ``dim`` moved to position ``last`` for the statements of ``group`` only (the other
    statements run in other nests: their rows stay)."""
    order = list(range(len(rows)))
    order.insert(last, order.pop(dim))
    out = []
    for here, src in zip(rows, (rows[k] for k in order)):
        out.append(Row({n: (src.coeffs[n] if n in group else c) for n, c in here.coeffs.items()},
                       {n: (src.consts[n] if n in group else c) for n, c in here.consts.items()}, here.scalar))
    return out


def _candidates(program: Program, deps: Dependences, rows: list[Row], dims: list[int],
                group: frozenset[str]) -> list[_Candidate]:
    """Each of ``dims`` moved innermost, with what the move gives."""
    loop_index = {d: k for k, d in enumerate(i for i, r in enumerate(rows) if not r.scalar)}
    loop_rows = {st.name: [r.coeffs[st.name] for r in rows if not r.scalar] for st in program.statements
                 if st.name in group}
    scores = innermost_scores(program, loop_rows, [loop_index[d] for d in dims])
    out = []
    for dim in dims:
        trial = _moved_innermost(rows, dim, dims[-1], group)
        par = loops_are_parallel(union_map(program, trial, group), deps, dims, group)
        score, stride1 = scores[loop_index[dim]]
        out.append(_Candidate(dim, trial, par[dims[-1]] and stride1 > 0, score,
                              next((d for d in dims if par[d]), None)))
    return out


def _reorder_band(program: Program, deps: Dependences, rows: list[Row], numbered: tuple[int, Band],
                  group: frozenset[str], fused_outer: Band | None, decisions: list[Decision]) -> list[Row]:
    number, band = numbered
    dims = [d for d in band.dims if any(any(rows[d].coeffs[n]) for n in group)]  # the group's loops
    if len(dims) < 2:
        return rows
    candidates = _candidates(program, deps, rows, dims, group)
    current = next(c for c in candidates if c.dim == dims[-1])
    if fused_outer is not None and any(any(rows[d].coeffs[n]) for d in fused_outer.dims for n in group):
        allowed = candidates  # the shared parallel loops outside the band are the group's parallelism
    else:
        first = current.first_parallel
        allowed = [c for c in candidates if first is None or (c.first_parallel is not None and c.first_parallel <= first)
                   or (c.vectorizable and not current.vectorizable and _below_loops(rows, band, group))]
    best = max(allowed, key=lambda c: (c.vectorizable, c.score, c.dim == dims[-1]))
    if best.dim == dims[-1]:
        return rows
    why = "parallel (vectorizable) and " if best.vectorizable and not current.vectorizable else ""
    whom = "" if len(group) == len(program.statements) else f" for {', '.join(sorted(group))}"
    decisions.append(Decision(
        "schedule", "band-order", f"band {number}",
        f"band {number}: time dimension {best.dim} moved innermost{whom}: {why}stride-1 / invariant accesses "
        f"(locality score {best.score} vs {current.score})",
        {"band": number, "dim": best.dim, "innermost": dims[-1], "statements": tuple(sorted(group)),
         "vectorizable": best.vectorizable, "score": best.score, "previous_score": current.score}))
    log.info("%s: %s", program.name, decisions[-1])
    return best.rows


def _below_loops(rows: list[Row], band: Band, group: frozenset[str]) -> bool:
    """Whether loops of the statements of ``group`` enclose ``band``.  A parallel loop of such a band
    opens its region once per iteration of the loops outside (doitgen's ``pp`` inside ``r`` and ``q``), so
    its worth is uncertain where a vectorizable innermost loop's is not: moving a parallel row innermost
    to vectorize it may then push the band's outermost parallel loop inward (it stays parallel)."""
    return any(not r.scalar and any(any(r.coeffs[n]) for n in group) for r in rows[:band.first])


__all__ = ["reorder_bands"]
