"""Intra-band loop order for spatial locality and vectorization (Pluto's intra-tile optimization).

The rows of a permutable band can be permuted freely: every dependence not carried by an outer band
has a non-negative component on each row, so any order keeps it lexicographically positive.  The
scheduler's cost function knows nothing of memory layout, so this pass picks, for each band, the row
whose innermost traversal touches memory best, and moves it innermost:

* the direction in which a statement's iterators move when only the candidate time dimension advances
  is ``d = H^-1 e`` (H: the statement's loop rows, square and invertible);
* an access ``A[L i + c]`` then moves by ``L d``: zero (invariant: +1), or only in its last subscript by
  one element (stride-1, contiguous in row-major order: +2), or elsewhere (0).

The scheduler (``pluto._reorder_bands``) puts innermost a row whose loop is parallel if there is one,
then the best total score; ties keep its order, and it refuses a move that would push the band's
outermost parallel loop inward.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sympy

from ..ir.affine import linear
from ..ir.program import Program, Statement

log = logging.getLogger("polytri.schedule")


def _direction(rows: list[tuple[int, ...]], pos: int) -> list[sympy.Rational] | None:
    """Iterator motion when time dimension ``pos`` of ``rows`` advances by one and the others stay."""
    h = sympy.Matrix(rows)
    if h.rows != h.cols or h.det() == 0:
        return None
    e = sympy.zeros(h.rows, 1)
    e[pos] = 1
    return list(h.LUsolve(e))


def _access_score(st: Statement, d: list[sympy.Rational]) -> tuple[int, int]:
    """(score, number of stride-1 accesses) of ``st``'s accesses along direction ``d``."""
    score = stride1 = 0
    for acc in (st.target, *st.reads):
        moves = []
        for sub in acc.index:
            form = linear(sub)
            if form is None:
                moves.append(None)
                continue
            coeffs, _ = form
            moves.append(sum(coeffs.get(it, 0) * d[k] for k, it in enumerate(st.iterators)))
        if any(m is None for m in moves):
            continue
        if all(m == 0 for m in moves):
            score += 1
        elif all(m == 0 for m in moves[:-1]) and abs(moves[-1]) == 1:
            score += 2
            stride1 += 1
    return score, stride1


def innermost_scores(program: Program, loop_rows: dict[str, list[tuple[int, ...]]],
                     band: Sequence[int]) -> dict[int, tuple[int, int]]:
    """For each position of ``band`` (indices into each statement's loop rows) as the innermost loop:
    the locality score (the higher, the more stride-1 and invariant accesses along it) and the number
    of stride-1 accesses."""
    scores = {}
    for pos in band:
        score = stride1 = 0
        for st in program.statements:
            rows = loop_rows.get(st.name, [])
            if not st.iterators or not rows:
                continue
            d = _direction(rows, pos)
            if d is not None and any(d):
                s, n = _access_score(st, d)
                score, stride1 = score + s, stride1 + n
        scores[pos] = (score, stride1)
    return scores
