"""Rectangular tiling of permutable bands, with a wavefront over tiles when no tile loop is parallel.

Tiling a permutable band ``(t_a, ..., t_b)`` of a schedule inserts, before it, one tile dimension
``floor(t_d / s_d)`` per band dimension: rectangles in the transformed space (parallelograms in the
original one when the band is skewed).  It is legal because every dependence not carried by an outer
band is non-negative along each band dimension, hence also along the tile dimensions.  When no tile
dimension is parallel (time-skewed stencils), the first tile dimension is replaced by the sum of the
first two (a wavefront): the second tile loop then carries no dependence and runs in parallel.

Tile sizes come from a small model of the machine (:func:`tile_sizes`): the working set of a tile,
one element per array per point of the tile's footprint, fills about half of the L2 cache.  The result
is proved legal again by the caller, like every schedule.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from dataclasses import replace

import islpy as isl
import sympy

from .. import dtypes
from ..ir.program import Program
from ..pipeline.decisions import Decision
from .dependences import Dependences
from .schedule import Band, Schedule, carried_at, dependences_between, parallel_dimensions, time_dependences

log = logging.getLogger("polytri.tiling")


@functools.cache
def cache_sizes() -> dict[int, int]:
    """Data cache sizes in bytes by level, read from sysfs (defaults: 32K, 1M, 32M)."""
    sizes = {1: 32 << 10, 2: 1 << 20, 3: 32 << 20}
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(root):
            path = os.path.join(root, entry)
            if not entry.startswith("index"):
                continue
            with open(os.path.join(path, "type")) as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(os.path.join(path, "level")) as f:
                level = int(f.read())
            with open(os.path.join(path, "size")) as f:
                text = f.read().strip()
            scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1], 1)
            sizes[level] = int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return sizes


def tile_sizes(program: Program, width: int) -> tuple[int, ...]:
    """Tile sizes for a band of ``width`` dimensions, outermost first.  The band's innermost loop is the
    stride-1 one (the scheduler put it there), so it gets long rows: one page (4 KiB) of elements, the
    unit of hardware prefetching, many vectors long.  The next loop gets 256 bytes' worth (a 4 KiB x 256 B
    / elem block of a 2-D operand, 256 KiB in float32: a quarter of a 1 MiB L2), the outer ones 64 bytes'
    worth (one cache line), which keeps many tiles for the threads.  Measured on this machine's suite
    (docs/scheduler.md); a finer model is issue 4's."""
    elem = max((dtypes.dtype(a.dtype).itemsize for a in program.arrays), default=8)
    page, mid, line = 4096, 256, 64
    l2 = cache_sizes()[2]
    if l2 < (1 << 20):  # smaller L2: shrink the middle dimension with it
        mid = max(64, mid * l2 // (1 << 20))
    sizes = [max(1, line // elem)] * max(0, width - 2) + [max(1, mid // elem), max(1, page // elem)]
    return tuple(sizes[-width:])


def remap(schedule: isl.UnionMap, ndim: int, text_out: list[str], conds: list[str]) -> isl.UnionMap:
    """``schedule`` followed by ``{ [c0, ..., c(ndim-1)] -> [text_out] : conds }``: new time dimensions as
    expressions of the old ones ``c<k>`` (names in ``text_out`` that are no ``c<k>`` are new dimensions,
    tied to the old ones by ``conds``)."""
    ins = [f"c{k}" for k in range(ndim)]
    cond = f" : {' and '.join(conds)}" if conds else ""
    m = isl.Map(f"{{ [{', '.join(ins)}] -> [{', '.join(text_out)}]{cond} }}")
    return schedule.apply_range(isl.UnionMap.from_map(m))


def tile_band(schedule: Schedule, band: Band, sizes: tuple[int, ...], deps: Dependences, *,
              intra_tile: bool = True) -> Schedule:
    """``schedule`` with ``band`` tiled by ``sizes`` (and a wavefront over the tiles if none of the tile
    loops would be parallel otherwise; with ``intra_tile``, a wavefront over the points of a tile when its
    innermost loop is a recurrence).  Records a decision of kind ``tile`` (``data``: the band's number,
    its ``sizes``, whether a ``wavefront`` runs over the tiles), and one of kind ``point-wavefront`` for
    the wavefront over a tile's points (``data["dims"]``: the two point dimensions)."""
    dims = list(band.dims)
    first = dims[0]
    tiled, par, wavefront = _tiled_map(schedule, dims, sizes, deps)
    scalar = list(schedule.scalar or (False,) * schedule.ndim)
    scalar[first:first] = [False] * len(dims)
    number = schedule.bands.index(band)
    what = Decision("schedule", "tile", f"band {number}",
                    f"band {number} tiled {'x'.join(map(str, sizes))}"
                    + (" with a wavefront over tiles (no tile loop was parallel)" if wavefront else ""),
                    {"band": number, "sizes": tuple(sizes), "wavefront": wavefront})
    log.info("%s", what)
    out = replace(schedule, map=tiled, parallel=par, bands=_shifted_bands(schedule.bands, band, first, len(dims)),
                  scalar=tuple(scalar), rows=_tiled_rows(schedule, dims, sizes, wavefront),
                  decisions=schedule.decisions + (what,), tiled=True,
                  origin=schedule.origin if schedule.tiled else schedule.origin + "+tiled")
    return _point_wavefront(out, Band(first + len(dims), len(dims)), deps) if intra_tile else out


def _tiled_map(schedule: Schedule, dims: list[int], sizes: tuple[int, ...], deps: Dependences
               ) -> tuple[isl.UnionMap, tuple[bool, ...], bool]:
    """The schedule's map with a tile dimension ``floor(c_d / s_d)`` inserted before the band for each of
    its dimensions ``dims``, its parallel dimensions, and whether the first tile dimension was replaced by
    the sum of the first two (a wavefront: no tile dimension was parallel)."""
    nd = schedule.ndim
    outs: list[str] = []
    conds: list[str] = []
    for k in range(nd):
        if k == dims[0]:
            for d, s in zip(dims, sizes):
                outs.append(f"T{d}")
                conds.append(f"{s}T{d} <= c{d} < {s}T{d} + {s}")
        outs.append(f"c{k}")
    tiled = remap(schedule.map, nd, outs, conds)
    par = parallel_dimensions(tiled, deps)
    first = dims[0]
    wavefront = len(dims) >= 2 and not any(par[first:first + len(dims)])
    if wavefront:
        outs2 = [f"c{k}" for k in range(nd + len(dims))]
        outs2[first] = f"c{first} + c{first + 1}"
        tiled = remap(tiled, nd + len(dims), outs2, [])
        par = parallel_dimensions(tiled, deps)
    return tiled, par, wavefront


def _tiled_rows(schedule: Schedule, dims: list[int], sizes: tuple[int, ...], wavefront: bool
                ) -> tuple[dict[str, str], ...]:
    """The schedule's rows (as text) with the tile rows ``tile(row, size)`` inserted before the band."""
    rows = []
    for k, row in enumerate(schedule.rows or ({},) * schedule.ndim):
        if k == dims[0]:
            for j, (d, s) in enumerate(zip(dims, sizes)):
                if wavefront and j == 0:
                    rows.append({n: f"tile({schedule.rows[d][n]}, {s}) + tile({schedule.rows[dims[1]][n]}, "
                                    f"{sizes[1]})" for n in row})
                else:
                    rows.append({n: f"tile({schedule.rows[d][n]}, {s})" for n in row})
        rows.append(row)
    return tuple(rows)


def _shifted_bands(bands: tuple[Band, ...], band: Band, first: int, width: int) -> tuple[Band, ...]:
    """``bands`` after ``width`` tile dimensions are inserted at ``first`` for ``band``: the tile band and
    the point band in its place, the bands after it shifted."""
    out = []
    for b in bands:
        if b == band:
            out.append(Band(first, width))
            out.append(Band(first + width, width))
        elif b.first > first:
            out.append(Band(b.first + width, b.width))
        else:
            out.append(b)
    return tuple(out)


def _carried(schedule: isl.UnionMap, deps: isl.UnionMap, dim: int) -> isl.Set | None:
    """Distances in time of the dependences of ``deps`` carried by dimension ``dim``, for any parameter
    values (``None`` when none)."""
    tdeps = time_dependences(schedule, deps)
    if tdeps is None:
        return None
    deltas = carried_at(tdeps, dim).deltas()
    deltas = deltas.project_out(isl.dim_type.param, 0, deltas.dim(isl.dim_type.param))
    return None if deltas.is_empty() else deltas


def _is_recurrence(schedule: isl.UnionMap, deps: Dependences, dim: int, most: int = 16) -> bool:
    """Whether the loop at time dimension ``dim`` is a recurrence, a chain of latencies: some statement
    waits for its own earlier instance, and every dependence the loop carries has one of at most
    ``most`` constant distances (a Gauss-Seidel sweep's neighbours).  Distances that vary with the loops
    or the parameters (a reduction into one element, an elimination) or dependences between different
    statements only (fdtd-2d) gain nothing from a wavefront over the points: measured, ludcmp ran 50x
    slower with it, lu 3x, atax 1.7x, fdtd-2d 1.8x."""
    if _carried(schedule, dependences_between(deps.all, lambda a, b: a == b), dim) is None:
        return False
    deltas = _carried(schedule, deps.all, dim)
    return deltas is not None and deltas.is_bounded() and deltas.count_val().to_python() <= most


def _point_wavefront(schedule: Schedule, points: Band, deps: Dependences) -> Schedule:
    """Inside a tile, when the innermost point loop is a recurrence (:func:`_is_recurrence`; a Gauss-Seidel
    sweep: each point waits for its neighbour, so the loop is one chain of floating-point latencies and
    cannot be vectorized), scan the last two point dimensions ``(a, b)`` as ``(a + b, a)``.  Every dependence is
    non-negative along a permutable band, so ``a + b`` is a legal outer dimension that carries every
    dependence the pair carried, and the new innermost loop runs over independent points: the core
    overlaps their chains.  Kept only when isl shows the new innermost loop parallel."""
    if points.width < 2:  # one point loop: no pair to skew (a band of one loop, as an empty domain's)
        return schedule
    a, b = points.dims[-2], points.dims[-1]
    if schedule.parallel[b]:
        return schedule
    if not _is_recurrence(schedule.map, deps, b):
        log.info("point loop %d is no recurrence of constant distances: no intra-tile wavefront", b)
        return schedule
    nd = schedule.ndim
    outs = [f"c{k}" for k in range(nd)]
    outs[a], outs[b] = f"c{a} + c{b}", f"c{a}"
    skewed = remap(schedule.map, nd, outs, [])
    par = parallel_dimensions(skewed, deps)
    if not par[b]:
        log.info("point loops %d, %d: no parallel inner loop after the intra-tile wavefront; kept", a, b)
        return schedule
    rows = list(schedule.rows)
    if rows:
        rows[a], rows[b] = ({n: _sum_text(schedule.rows[a][n], schedule.rows[b][n]) for n in schedule.rows[a]},
                            schedule.rows[a])
    what = Decision("schedule", "point-wavefront", f"band {schedule.bands.index(points)}",
                    f"intra-tile wavefront: point loops {a}, {b} scanned as ({a} + {b}, {a}), so the innermost "
                    f"loop runs over independent points (it was a recurrence)", {"dims": (a, b)})
    log.info("%s", what)
    return replace(schedule, map=skewed, parallel=par, rows=tuple(rows), decisions=schedule.decisions + (what,))


def tile_schedule(program: Program, schedule: Schedule, deps: Dependences, *, size: int | None = None,
                  intra_tile: bool = True) -> Schedule:
    """Tile every permutable band of width >= 2 (a one-dimensional band gains nothing); ``size`` overrides
    the model's tile side.  ``intra_tile=False`` keeps the band's own hyperplanes as the point loops (the
    pictures of ``polytri plot`` draw tiles from them)."""
    out = schedule
    for band in sorted(schedule.bands, key=lambda b: -b.first):  # inner bands first: indices stay valid
        if band.width < 2:
            continue
        sizes = (size,) * band.width if size else tile_sizes(program, band.width)
        out = tile_band(out, band, sizes, deps, intra_tile=intra_tile)
    return out


def _sum_text(a: str, b: str) -> str:
    """The text of the affine sum of two schedule rows, simplified (``i + 2*t``, not ``t + t + i``); the
    plain concatenation where a row is not affine in names and numbers."""
    names = set(re.findall(r"[A-Za-z_]\w*", f"{a} {b}"))
    try:
        total = sympy.parse_expr(f"({a}) + ({b})", local_dict={n: sympy.Symbol(n) for n in names})
        affine = total.is_polynomial() and (total.is_number or sympy.Poly(total).total_degree() <= 1)
    except (SyntaxError, TypeError, ValueError, sympy.SympifyError, sympy.PolynomialError):
        return f"{a} + {b}"
    return str(total) if affine else f"{a} + {b}"
