"""Time tiles around the input order: the locality of a skewed stencil's tiles, the code of its own loops.

A time-iterated stencil (jacobi-2d: ``for t: B = f(A); A = f(B)``) sweeps its arrays once per time
step.  When they outgrow the L2 cache, every sweep reads them from further away, and the time loop's
reuse is lost.  Pluto finds the band that fixes this, ``(t, 2t + i, 2t + j)``: every dependence is
non-negative along it, so its tiles can run one after another.  But scanned inside the tiles, its skewed
point loops lose what the input order had: the innermost loop runs a few iterations between bounds of
``max``/``min`` terms, with both statements fused behind guards, and no longer vectorizes (Pluto's tiles
ran jacobi-2d 1.34x slower than its parallel input order on two threads at PolyBench's LARGE size).

:func:`time_tiles` keeps the tiles and gives the points their input order.  The tile dimensions are
``floor(h_d / s_d)`` of the band's first two hyperplanes ``h_d``; inside a tile, the
statement instances run in the input order's schedule.  So each time step of a tile runs the input
order's statements, one after another, over the tile's rows, and the innermost loop (the band's
untiled dimension: a whole row of ``j``) is the input order's own: full length, no guard, stride one.
Legal: along every dependence the tile dimensions do not decrease (floors of non-negative distances,
the band is permutable), and two instances in one tile run in the input order, which is legal.  The
schedule is proved legal with isl like every other.  As in :mod:`.tiling`, when no tile dimension is
parallel the first becomes the sum of the first two: a wavefront whose second tile loop is parallel.

Where: bands of three dimensions (time and two of space: a 2-D stencil), tiled along the first two, so
a tile keeps whole rows; and bands of two (time and one of space: a 1-D stencil), tiled along both, so a
tile runs a stretch of each row (:data:`SIZES_1D`).  A 3-D stencil's band has four: tiled along two, a
tile keeps whole planes (heat-3d at PolyBench's LARGE size: 48 planes of 120 x 120 of two arrays,
11 MiB, beyond the L2); along three, each point of a tile is reread fewer than twice from the cache
(8 x 8 x 32 tiles of heat-3d: its 8 steps touch 24 x 48 columns to compute 8 x 32), and it ran between 0.94x and 1.11x the time of its
input order in three runs (taken at load 1.1-1.7: indicative only): no gain to count on.  Measured again
on a quiet machine (PolyBench's LARGE size, one process, load 0.58 at the start; docs/performance.md),
every shape tried ran slower than the input order with OpenMP: along three, 8 x 8 x 32 1.13x its time,
4 x 8 x 32 1.07x, 8 x 16 x 16 1.02x, 16 x 16 x 32 1.09x; whole planes, 8 x 32 1.19x.  Its two arrays, 27.6
MB, fit in the 32 MiB L3.  So a 3-D stencil keeps its input order.

Sizes: 8 time steps by 32 along the space dimension (a tile of jacobi-2d keeps 48 rows of its two
arrays: 1 MiB at PolyBench's LARGE size).  4 to 16 steps by 32 ran within 5% of each other, 8 by 128
1.5x slower, in one sweep whose load rose from 0.6 to 1.2 (indicative).  ``polytri bench --dataset
large`` on the development machine, two threads, started at load 0.45 (1.07 at its end, the run's own
threads counted): jacobi-2d 485 ms against 700 for the input order with OpenMP (0.69x), fdtd-2d 396
against 756 (0.52x); docs/scheduler.md.

A 1-D stencil's arrays are rows that stay in the L1 or L2 cache (jacobi-1d at PolyBench's LARGE size:
two arrays of 2000 doubles): its tiles are for parallelism, not locality.  Each time step of the input
order is a parallel loop too short to pay for a parallel region (2000 points: about 14000 operations),
so it runs on one thread; a wavefront over time tiles of 32 steps by 512 points runs two tiles or more
side by side, one parallel region per wavefront (about 20 at that size) instead of two per time step.
The kernel runs them where a row of tiles holds two of them and the time loop makes two rows of tiles
(:func:`tiles_side_by_side`), the input order elsewhere (jacobi-1d at PolyBench's MEDIUM size: rows of
400 points).  At the LARGE size, two threads, calls back to back in one process (load 0.1): 0.24 ms
against 0.36 for the input order (0.68x), 0.35 on one thread.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import islpy as isl

from ..ir.affine import evaluate
from ..ir.expr import Binary, Const, Expr, conjunction, var_names
from ..ir.printer import expr_to_str
from ..pipeline.decisions import Decision
from .dependences import Dependences
from .loop_ast import Block, For, If, Node, Run
from .loop_work import Range, trip_count
from .schedule import Band, Schedule, parallel_dimensions
from .tiling import remap

log = logging.getLogger("polytri.tiling")

#: Time steps per tile and its side along space, for a 2-D stencil (measured: module doc).
SIZES = (8, 32)
#: The same for a 1-D stencil: 32 steps of 512 points (hand-written tiles in a C harness, PolyBench's
#: LARGE size, two threads, load 0.2: 0.69x the time of the input order on one thread; 25 x 400 0.72x,
#: 16 x 256 0.80x, 50 x 600 0.70x, 8 x 32 1.53x; on one thread, 25 x 600 took 0.99x).
SIZES_1D = (32, 512)


def spanning_band(pluto: Schedule) -> Band | None:
    """The band of ``pluto`` with three dimensions (two to tile and one to leave whole) or two (both
    tiled), when it is its only band of two or more and every statement runs in it: the time dimensions
    before it are constants equal for all statements.  ``None`` otherwise (a 3-D stencil; statements
    before or after the stencil's loops)."""
    wide = [b for b in pluto.bands if b.width >= 2]
    if len(wide) != 1 or wide[0].width not in (2, 3):
        return None
    band = wide[0]
    if band.first == 0:
        return band
    maps: list[isl.Map] = []
    pluto.map.foreach_map(maps.append)
    prefixes = [m.range().project_out(isl.dim_type.set, band.first, pluto.ndim - band.first) for m in maps]
    union = prefixes[0]
    for p in prefixes[1:]:
        union = union.union(p)
    return band if union.is_singleton() else None


def time_tiles(original: Schedule, pluto: Schedule, deps: Dependences, *, size: int | None = None
               ) -> Schedule | None:
    """The input order ``original`` run in the tiles of the first two dimensions of ``pluto``'s
    :func:`spanning_band`, ``None`` when it has none.  ``size`` overrides every tile side.  Not proved
    legal here: the caller proves it, like every schedule.  Records a decision of kind ``time-tile``
    (``data``: the tiled ``dims`` of Pluto's schedule, the ``sizes``, whether a ``wavefront`` runs over
    the tiles)."""
    band = spanning_band(pluto)
    if band is None:
        return None
    dims = list(band.dims)[:2]
    sizes = (size,) * len(dims) if size else tile_sides(band)
    tiles = remap(pluto.map, pluto.ndim, ["T0", "T1"],   # floor(c_d / s_d) of the band's first two rows
                  [f"{s}T{k} <= c{d} < {s}T{k} + {s}" for k, (d, s) in enumerate(zip(dims, sizes))])
    full = tiles.flat_range_product(original.map)
    par = parallel_dimensions(full, deps)
    wavefront = not any(par[:len(dims)])
    if wavefront:
        full = remap(tiles, len(dims), ["c0 + c1", "c1"], []).flat_range_product(original.map)
        par = parallel_dimensions(full, deps)
    what = Decision("schedule", "time-tile", "band 0",
                    f"time tiles {'x'.join(map(str, sizes))} over Pluto's time dimensions "
                    f"{', '.join(map(str, dims))}, the input order inside each tile"
                    + (", with a wavefront over tiles (no tile loop was parallel)" if wavefront else ""),
                    {"dims": tuple(dims), "sizes": sizes, "wavefront": wavefront})
    log.info("%s", what)
    scalar = original.scalar or (False,) * original.ndim
    return replace(original, map=full, parallel=par, origin="time-tiled", bands=(Band(0, len(dims)),),
                   scalar=(False,) * len(dims) + tuple(scalar), rows=(), decisions=(what,), tiled=True)


def tile_sides(band: Band) -> tuple[int, int]:
    """The default sides of the time tiles of ``band`` (:func:`spanning_band`'s)."""
    return SIZES_1D if band.width == 2 else SIZES


def tiles_side_by_side(original: Node, sides: tuple[int, int]) -> list[tuple[str, Expr, int]] | None:
    """Where a wavefront over time tiles of ``sides`` (steps, points) runs two whole tiles side by side:
    in the input order's AST ``original``, the outermost loop around each statement (time) makes two tile
    heights or more, and the innermost (space) two tile sides or more.  The tests, ``(loop, trip count
    bound, least count)`` (the counts: :func:`.loop_work.trip_count`), all to hold; ``None`` when some
    loop has no affine bound, a statement is not two loops deep, or a test cannot hold at any size (the
    counts are constants below their least)."""
    nests = _statement_loops(original, (), (), {})
    if not nests or any(len(loops) < 2 for loops, _ in nests):
        return None
    tests: dict[tuple[str, str, int], tuple[str, Expr, int]] = {}
    for loops, trips in nests:
        for k, least in ((0, 2 * sides[0]), (-1, 2 * sides[1])):
            tests.setdefault((loops[k].var, expr_to_str(trips[k]), least), (loops[k].var, trips[k], least))
    if any(not var_names(t, "param") and evaluate(t, {}) < least for _, t, least in tests.values()):
        return None
    return list(tests.values())


def _statement_loops(n: Node, loops: tuple[For, ...], trips: tuple[Expr, ...], ranges: dict[str, Range]
                     ) -> list[tuple[tuple[For, ...], tuple[Expr, ...]]] | None:
    """For each statement run in ``n`` (inside ``loops``, whose trip counts are bounded by ``trips``), the
    loops around it and the bounds of their trip counts; ``None`` when a loop has no affine bound."""
    if isinstance(n, Run):
        return [(loops, trips)]
    if isinstance(n, For):
        trip = trip_count(n, ranges)
        return None if trip is None else _statement_loops(n.body, loops + (n,), trips + (trip[0],),
                                                          {**ranges, n.var: trip[1]})
    if isinstance(n, Block):
        children: tuple[Node, ...] = tuple(n.body)
    elif isinstance(n, If):
        children = (n.then,) if n.orelse is None else (n.then, n.orelse)
    else:
        children = ()
    out: list[tuple[tuple[For, ...], tuple[Expr, ...]]] = []
    for c in children:
        got = _statement_loops(c, loops, trips, ranges)
        if got is None:
            return None
        out += got
    return out


def side_by_side_condition(tests: list[tuple[str, Expr, int]]) -> Expr:
    """The test of :func:`tiles_side_by_side`'s list, as one expression of the parameters."""
    cond = conjunction([Binary(">=", trip, Const(least)) for _, trip, least in tests])
    assert cond is not None
    return cond


__all__ = ["SIZES", "SIZES_1D", "side_by_side_condition", "spanning_band", "tile_sides", "tiles_side_by_side",
           "time_tiles"]
