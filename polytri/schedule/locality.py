"""Intra-band loop order for spatial locality and vectorization (Pluto's intra-tile optimization).

The rows of a permutable band can be permuted freely: every dependence not carried by an outer band
has a non-negative component on each row, so any order keeps it lexicographically positive.  The
scheduler's cost function knows nothing of memory layout, so this pass picks, for each band, the row
whose innermost traversal touches memory best, and moves it innermost:

* the direction in which a statement's iterators move when only the candidate time dimension advances
  is ``d = H^-1 e`` (H: the statement's loop rows, square and invertible);
* an access ``A[L i + c]`` then moves by ``L d``: zero (invariant: +1), or only in its last subscript by
  one element (stride-1, contiguous in row-major order: +2), or elsewhere (0).

The scheduler (``band_order.reorder_bands``) puts innermost a row whose loop is parallel if there is one,
then the best total score; ties keep its order, and it refuses a move that would push the band's
outermost parallel loop inward.

``strided_streams`` compares whole schedules instead: it counts the memory streams that cross a cache
line on every innermost iteration, and ``pt.compile``'s ``schedule='auto'`` keeps the input order when
the Pluto schedule has more of them (``compiler._locality_loss``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

import islpy as isl

from ..ir.affine import linear
from ..ir.expr import Access
from ..ir.printer import expr_to_str
from ..ir.program import Program, Statement
from .int_rank import int_rank

log = logging.getLogger("polytri.schedule")


@functools.lru_cache(maxsize=4096)
def _inverse(h: tuple[tuple[int, ...], ...]) -> tuple[tuple[Fraction, ...], ...] | None:
    """The exact inverse of the square integer matrix ``h`` (Gauss-Jordan over the rationals), or ``None``
    when ``h`` is not square or singular.  Scheduling a transformer block asked for some hundred of
    these; sympy's took about a fifth of its scheduling time (cProfile, busy machine: a share, not a timing)."""
    n = len(h)
    if any(len(r) != n for r in h):
        return None
    a = [[Fraction(v) for v in r] + [Fraction(int(j == k)) for j in range(n)] for k, r in enumerate(h)]
    for c in range(n):
        p = next((r for r in range(c, n) if a[r][c] != 0), None)
        if p is None:
            return None
        a[c], a[p] = a[p], a[c]
        pivot = a[c][c]
        a[c] = [v / pivot for v in a[c]]
        for r in range(n):
            if r != c and a[r][c] != 0:
                f = a[r][c]
                a[r] = [x - f * y for x, y in zip(a[r], a[c])]
    return tuple(tuple(r[n:]) for r in a)


def _direction(rows: list[tuple[int, ...]], pos: int) -> list[Fraction] | None:
    """Iterator motion when time dimension ``pos`` of ``rows`` advances by one and the others stay (rows of
    zeros, dimensions along which the statement does not move, are left out)."""
    live = [k for k, r in enumerate(rows) if any(r)]
    if pos not in live:
        return None
    inverse = _inverse(tuple(tuple(rows[k]) for k in live))
    if inverse is None:
        return None
    col = live.index(pos)
    return [r[col] for r in inverse]


def _access_score(st: Statement, d: list[Fraction]) -> tuple[int, int]:
    """(score, number of stride-1 accesses) of ``st``'s accesses along direction ``d``."""
    score = stride1 = 0
    for acc in (st.target, *st.reads):
        moves = _moves(st, acc, d)
        if moves is None:
            continue
        kind = _motion(moves)
        if kind == "invariant":
            score += 1
        elif kind == "stride-1":
            score += 2
            stride1 += 1
    return score, stride1


def _moves(st: Statement, acc: Access, d: list[Fraction]) -> list[Fraction] | None:
    """How far each subscript of ``acc`` (in ``st``) moves per step along direction ``d``, or ``None``
    when a subscript is not affine."""
    moves: list[Fraction] = []
    for sub in acc.index:
        form = linear(sub)
        if form is None:
            return None
        coeffs, _ = form
        moves.append(sum((coeffs.get(it, 0) * d[k] for k, it in enumerate(st.iterators)), Fraction(0)))
    return moves


def _motion(moves: Sequence[Fraction]) -> str:
    """How an access that moves by ``moves`` (per subscript) per step walks memory: ``invariant``,
    ``stride-1`` (one element along the last, contiguous subscript) or ``strided`` (a new cache line
    each step)."""
    if not any(moves):
        return "invariant"
    return "stride-1" if not any(moves[:-1]) and abs(moves[-1]) == 1 else "strided"


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


# -- strided streams of a whole schedule (the CPU schedule choice) --------------------------------------
#: One time dimension of one statement: its iterator coefficients and its constant.
TimeRow = tuple[tuple[int, ...], int]
#: A strided stream: (the innermost loop, the array, the subscripts as linear functions of time).
StreamKey = tuple[tuple[int | None, ...], str, tuple[tuple[Fraction, ...], ...]]


def statement_times(schedule: isl.UnionMap, program: Program) -> dict[str, list[TimeRow]]:
    """Each statement's time dimensions as (iterator coefficients, constant), read from ``schedule``.

    A statement whose time is piecewise or quasi-affine (tile loops: ``floor(i / 32)``) is left out: its
    innermost loop is not one direction of its iteration space."""
    maps: dict[str, isl.Map] = {}
    schedule.foreach_map(lambda m: maps.__setitem__(m.get_tuple_name(isl.dim_type.in_), m))
    out: dict[str, list[TimeRow]] = {}
    for st in program.statements:
        if st.name not in maps:
            continue
        pma = isl.PwMultiAff.from_map(maps[st.name])
        rows: list[TimeRow] = []
        for k in range(pma.dim(isl.dim_type.out)):
            pieces = pma.get_pw_aff(k).get_pieces()
            if len(pieces) != 1 or pieces[0][1].dim(isl.dim_type.div):
                break
            aff = pieces[0][1]
            coeffs = tuple(int(aff.get_coefficient_val(isl.dim_type.in_, j).to_python())
                           for j in range(len(st.iterators)))
            rows.append((coeffs, int(aff.get_constant_val().to_python())))
        else:
            out[st.name] = rows
    return out


def loop_dimensions(times: Sequence[TimeRow]) -> list[int]:
    """The time dimensions that are loops of the statement: rows independent of the rows before them.
    A row that depends on earlier ones does not iterate (the outer loops fix it), and a zero row is a
    scalar dimension."""
    dims: list[int] = []
    for d, (coeffs, _) in enumerate(times):
        if any(coeffs) and int_rank([*(times[e][0] for e in dims), coeffs]) > len(dims):
            dims.append(d)
    return dims


class Stream(NamedTuple):
    """One strided stream: the loop depth of the statements that walk it, and one access that does."""

    depth: int
    where: str
    """``"S2: A[i, j]"``"""


def strided_streams(program: Program, schedule: isl.UnionMap) -> dict[StreamKey, Stream]:
    """The strided memory streams of ``schedule``'s innermost loops.

    Each access is written as a function of time, ``L H^-1 t`` (``H``: the statement's loop rows), and is
    strided when it moves across cache lines along the innermost loop.  Accesses to the same array with
    the same linear function of time in the same innermost loop (Wolf and Lam's uniformly generated
    references: ``A[i][j]`` read and written, or read by two fused statements) walk the same lines and
    count once: fusing gemver's ``A[i][j]`` update with the transposed read of ``A[j][i]`` adds no stream,
    putting bicg's ``s[j] += r[i] * A[i][j]`` on ``(j, i)`` next to ``q[i] += A[i][j] * p[j]`` on ``(i, j)``
    does."""
    streams: dict[StreamKey, Stream] = {}
    all_times = statement_times(schedule, program)
    for st in program.statements:
        times = all_times.get(st.name)
        if not st.iterators or times is None:
            continue
        dims = loop_dimensions(times)
        if len(dims) != len(st.iterators):
            continue
        inverse = _inverse(tuple(tuple(times[d][0]) for d in dims))
        if inverse is None:
            continue
        # the innermost loop: the scalar values and which dimensions loop, up to the innermost one
        loop = tuple(None if any(coeffs) else const for coeffs, const in times[:dims[-1] + 1])
        for acc in (st.target, *st.reads):
            of_time = _of_time(st, acc, inverse)
            if of_time is not None and _motion([row[-1] for row in of_time]) == "strided":
                where = f"{st.name}: {expr_to_str(acc)}"
                streams.setdefault((loop, acc.array, of_time), Stream(len(dims), where))
    return streams


def dominant_streams(streams: Sequence[Stream], depth: int) -> list[str]:
    """The accesses of the streams walked by statements ``depth`` loops deep.  A statement ``d`` loops
    deep runs about ``n^d`` times, so the deepest statements with a strided stream dominate the cost of a
    schedule's strided streams, and only their number is compared (a stream over a diagonal, in a
    loop of depth 1, does not weigh against the same O(n^3) streams elsewhere)."""
    return [s.where for s in streams if s.depth == depth]


def _of_time(st: Statement, acc: Access,
             inverse: tuple[tuple[Fraction, ...], ...]) -> tuple[tuple[Fraction, ...], ...] | None:
    """Each subscript of ``acc`` as coefficients of the statement's loop dimensions (``L H^-1``), or
    ``None`` for a subscript that is not affine."""
    rows = []
    for sub in acc.index:
        form = linear(sub)
        if form is None:
            return None
        coeffs = [form[0].get(it, 0) for it in st.iterators]
        rows.append(tuple(sum((c * inverse[i][j] for i, c in enumerate(coeffs)), Fraction(0))
                          for j in range(len(inverse))))
    return tuple(rows)
