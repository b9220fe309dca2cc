"""Plane geometry for the pictures: convex hulls, half-plane clipping, affine fits.

A tile of a rectangular tiling in the schedule's space is, in a 2-D slice of the original space, the
set of points where each tiled time dimension ``phi`` lies in ``[s*T, s*T + s)``.  Widening each strip
by half a unit (``s*T - 1/2 <= phi <= s*T + s - 1/2``) gives polygons that tile the plane exactly:
neighbouring tiles share an edge and never overlap, and every integer point lies inside its own tile.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

XY = tuple[float, float]


def convex_hull(points: Sequence[XY]) -> list[XY]:
    """Convex hull, counter-clockwise, by Andrew's monotone chain (collinear points dropped)."""
    pts = sorted(set(points))
    if len(pts) <= 2:
        return pts

    def cross(o: XY, a: XY, b: XY) -> float:
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list[XY] = []
    upper: list[XY] = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return lower[:-1] + upper[:-1]


def padded_hull(points: Sequence[tuple[int, int]], pad: float = 0.5) -> list[XY]:
    """The hull of the squares of half-side ``pad`` around ``points``."""
    return convex_hull([(x + dx, y + dy) for x, y in points for dx in (-pad, pad) for dy in (-pad, pad)])


def clip(polygon: list[XY], a: float, b: float, c: float) -> list[XY]:
    """The part of a convex polygon where ``a*x + b*y <= c`` (Sutherland-Hodgman, one edge)."""
    out: list[XY] = []
    n = len(polygon)
    for k in range(n):
        p, q = polygon[k], polygon[(k + 1) % n]
        fp, fq = a * p[0] + b * p[1] - c, a * q[0] + b * q[1] - c
        if fp <= 0:
            out.append(p)
        if (fp < 0 < fq) or (fq < 0 < fp):
            t = fp / (fp - fq)
            out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
    return out


def fit_affine(points: Sequence[tuple[int, int]], values: Sequence[int]) -> tuple[float, float, float]:
    """``(a, b, c)`` with ``a*x + b*y + c == value`` at every point (least squares; exact for affine data)."""
    m = np.array([[x, y, 1.0] for x, y in points])
    sol, *_ = np.linalg.lstsq(m, np.array(values, dtype=float), rcond=None)
    return float(sol[0]), float(sol[1]), float(sol[2])


def area(polygon: Sequence[XY]) -> float:
    """Signed area (positive counter-clockwise), by the shoelace formula."""
    n = len(polygon)
    return 0.5 * sum(polygon[k][0] * polygon[(k + 1) % n][1] - polygon[(k + 1) % n][0] * polygon[k][1]
                     for k in range(n))


def contains(polygon: Sequence[XY], p: tuple[float, float], eps: float = 1e-9) -> bool:
    """Whether a counter-clockwise convex polygon contains ``p`` (boundary included)."""
    n = len(polygon)
    for k in range(n):
        (x0, y0), (x1, y1) = polygon[k], polygon[(k + 1) % n]
        if (x1 - x0) * (p[1] - y0) - (y1 - y0) * (p[0] - x0) < -eps:
            return False
    return n >= 3
