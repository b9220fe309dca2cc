"""The rank of a small integer matrix, exactly (the scheduler's rows and access matrices).

Fraction-free Gaussian elimination on Python integers: each elimination step replaces a row by
``pivot * row - factor * pivot_row``, so every entry stays an integer and the rank is exact.  For the
matrices the scheduler builds (a few rows of a few small integers) this is far cheaper than a general
symbolic matrix (adi's schedule asked for 192 ranks: 0.22 s of its compile).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import gcd


def int_rank(rows: Sequence[Sequence[int]]) -> int:
    """The rank of the integer matrix ``rows`` (0 for no rows)."""
    m = [list(r) for r in rows if any(r)]
    rank = 0
    width = max((len(r) for r in m), default=0)
    for col in range(width):
        pivot = next((i for i in range(rank, len(m)) if m[i][col]), None)
        if pivot is None:
            continue
        m[rank], m[pivot] = m[pivot], m[rank]
        p = m[rank]
        for i in range(rank + 1, len(m)):
            f = m[i][col]
            if f:
                row = [p[col] * a - f * b for a, b in zip(m[i], p)]
                g = 0
                for x in row:
                    g = gcd(g, x)
                m[i] = [x // g for x in row] if g > 1 else row
        rank += 1
        if rank == len(m):
            break
    return rank


__all__ = ["int_rank"]
