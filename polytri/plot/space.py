"""What the iteration-space picture shows, computed with isl (no drawing here).

For one statement, small parameter values and a 2-D slice of its domain (two iterators free, the others
fixed), :func:`iteration_space` enumerates the points of the slice, the dependences between them, the
time each point gets in the chosen schedule and, when that schedule is tiled, the tile of each point and
the order in which the tiles run.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import islpy as isl

from ..errors import OptionError
from ..ir.builder import to_program
from ..ir.program import Program, Statement
from ..pipeline.target import get_target
from ..schedule.choose import choose_schedule
from ..schedule.dependences import Dependences, compute_dependences
from ..schedule.legality import prove_legal
from ..schedule.schedule import Schedule, original_schedule
from ..schedule.tiling import tile_schedule, tile_sizes
from .geometry import XY, clip, fit_affine, padded_hull

log = logging.getLogger("polytri.plot")

Point = tuple[int, ...]
DEP_KINDS = ("flow", "anti", "output")
#: Parameter value used for every parameter the caller does not give.
DEFAULT_PARAM = 8
#: The schedules a picture can draw: ``compiled`` is what ``pt.compile`` chose for the cpu target.
SCHEDULES = ("compiled", "pluto", "auto", "original")


@dataclass(frozen=True)
class Arrow:
    """One dependence between two points of the slice."""

    source: tuple[int, int]
    """(x, y) of the source instance."""
    target: tuple[int, int]
    """(x, y) of the target instance."""
    kind: str
    """``flow``, ``anti`` or ``output``."""
    via: str | None = None
    """For a flow dependence through another statement (S -> X -> S): X; ``None`` when direct."""


@dataclass(frozen=True)
class Tile:
    """The points of one tile that fall in the slice."""

    number: int
    """1-based rank of the tile in execution order (lexicographic order of the tile coordinates)."""
    coords: tuple[int, ...]
    """Time vector up to and including the last tile dimension."""
    points: tuple[tuple[int, int], ...]
    """(x, y) of its points in the slice."""
    wave: int
    """Tiles of one wave may run at the same time: in the slice, they first differ at a parallel tile
    dimension.  Equal to ``number`` when no tile dimension that varies in the slice is parallel."""
    polygon: tuple[XY, ...]
    """The tile's region in the slice (its strips widened by half a unit, clipped to the domain):
    neighbouring tiles share edges and never overlap."""


@dataclass(frozen=True)
class SpaceData:
    """Everything the iteration-space picture shows."""

    program: str
    statement: Statement
    axes: tuple[str, str]
    """(x iterator, y iterator); the y iterator is the outer one.  For a 1-D statement y is ``""``."""
    fixed: dict[str, int]
    """Values of the iterators that are not drawn."""
    params: dict[str, int]
    points: tuple[tuple[int, int], ...]
    """(x, y) of every instance of the slice, in execution order."""
    time: dict[tuple[int, int], tuple[int, ...]]
    """Each point's time vector under the schedule."""
    arrows: tuple[Arrow, ...]
    tiles: tuple[Tile, ...]
    """Empty when the schedule is not tiled."""
    schedule: Schedule
    strips: tuple[Strip, ...]
    """The tile dimensions of the schedule (empty when not tiled)."""
    tile_size: int | None
    compiled: bool = False
    """Whether the schedule is the one ``pt.compile`` chose (``schedule="compiled"``)."""

    @property
    def waves(self) -> bool:
        """Whether some tiles of the slice may run in parallel."""
        return any(t.wave != t.number for t in self.tiles)

    @property
    def order(self) -> dict[tuple[int, int], int]:
        """1-based execution rank of each point of the slice."""
        return {p: k + 1 for k, p in enumerate(self.points)}


# -- schedule ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Strip:
    """One tile dimension of a tiled schedule: ``time[tile] = floor(time[point] / size)`` (up to a
    wavefront, which adds the next tile dimension to the first)."""

    tile: int
    """Index of the tile dimension in the time vector."""
    point: int
    """Index of the band dimension it tiles."""
    size: int
    """Tile side along it."""


def compiled_schedule(program: Program, deps: Dependences, options: Mapping[str, Any] | None = None) -> Schedule:
    """The schedule ``pt.compile(program, target="cpu", options=options)`` generates code from: the cpu
    target's own scheduling stage, run on the same program and dependences, without generating code."""
    from ..compiler import compile as _registers_the_targets  # noqa: F401

    target = get_target("cpu")
    opts = target.check_options(options)
    schedule, _, _ = target.schedule(program, deps, opts, built=False)
    return schedule


def picture_schedule(program: Program, deps: Dependences, *, schedule: str = "pluto", fuse: str = "smart",
                     tile: bool = True, tile_size: int | None = 4, options: Mapping[str, Any] | None = None
                     ) -> tuple[Schedule, tuple[Strip, ...]]:
    """The schedule to draw and its tile dimensions.

    ``schedule`` is ``compiled``, ``pluto``, ``auto`` or ``original``.  ``compiled`` draws what
    ``pt.compile`` chooses for the cpu target with the compile ``options`` (its defaults when ``None``; ``fuse``,
    ``tile`` and ``tile_size`` are not used), tiles included.  The others are the compile option's values:
    the untiled result is tiled with ``tile_size`` (every band dimension; ``None``: the compiler's model)
    when ``tile`` is set and it has a band of width >= 2, and proved legal.  The tiles are the compiler's;
    inside a tile the points keep the band's order (the compiler may scan them along a wavefront, see
    ``tile_band``)."""
    if schedule == "compiled":
        return _compiled_picture(program, deps, options)
    if schedule == "original":
        return original_schedule(program, deps), ()
    if schedule not in ("pluto", "auto"):
        raise OptionError(f"schedule must be one of {', '.join(map(repr, SCHEDULES))}, got {schedule!r}")
    untiled, _, _ = choose_schedule(program, deps, schedule, fuse, tile=False)
    bands = sorted((b for b in untiled.bands if b.width >= 2), key=lambda b: b.first)
    if not tile or untiled.origin == "original" or not bands:
        return untiled, ()
    tiled = tile_schedule(program, untiled, deps, size=tile_size, intra_tile=False)
    prove_legal(tiled.map, deps, what=f"{program.name}: the tiled schedule")
    strips: list[Strip] = []
    shift = 0
    for b in bands:  # tile_schedule inserts a band's tile dimensions just before it, sizes as below
        sizes = (tile_size,) * b.width if tile_size else tile_sizes(program, b.width)
        first = b.first + shift
        strips += [Strip(first + j, first + b.width + j, sizes[j]) for j in range(b.width)]
        shift += b.width
    if tiled.ndim != untiled.ndim + shift:
        raise AssertionError(f"tiled schedule has {tiled.ndim} dimensions, expected {untiled.ndim + shift}")
    return tiled, tuple(strips)


def _compiled_picture(program: Program, deps: Dependences, options: Mapping[str, Any] | None
                      ) -> tuple[Schedule, tuple[Strip, ...]]:
    """:func:`compiled_schedule`, and when it is tiled, the same tiles with the band's own point loops (the
    compiler may scan a tile's points along a wavefront; the tiles and their order are the same)."""
    chosen = compiled_schedule(program, deps, options)
    if not chosen.tiled:   # with an alternative, the kernel's map is still the schedule's own
        return chosen, ()
    opts = get_target("cpu").check_options(options)
    drawn, strips = picture_schedule(program, deps, schedule="pluto", fuse=opts["fuse"], tile=True,
                                     tile_size=opts["tile_size"])
    if not strips:
        raise AssertionError(f"{program.name}: pt.compile tiled the schedule, the picture found no band to tile")
    return drawn, strips


# -- isl helpers ---------------------------------------------------------------------------------------
def _fix_params(program: Program, params: Mapping[str, int]) -> isl.Set:
    unknown = sorted(set(params) - set(program.params))
    if unknown:
        raise OptionError(f"{program.name} has no parameter {', '.join(unknown)}; its parameters: "
                          f"{', '.join(program.params) or 'none'}")
    cons = " and ".join(f"{p} = {params[p]}" for p in program.params)
    ctx = isl.Set(f"[{', '.join(program.params)}] -> {{ : {cons or '0 = 0'} }}")
    if ctx.intersect(program.context).is_empty():
        raise OptionError(f"{program.name}: parameter values {dict(params)} violate its assumptions "
                          f"{program.context}")
    return ctx


def _coords(point: isl.Point, n: int) -> tuple[int, ...]:
    return tuple(int(point.get_coordinate_val(isl.dim_type.set, k).to_python()) for k in range(n))


def _points(s: isl.Set) -> list[tuple[int, ...]]:
    n = s.dim(isl.dim_type.set)
    out: list[tuple[int, ...]] = []
    s.foreach_point(lambda p: out.append(_coords(p, n)))
    return out


def _pairs(m: isl.Map) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every (input, output) pair of a bounded map."""
    n_in = m.dim(isl.dim_type.in_)
    return [(c[:n_in], c[n_in:]) for c in _points(m.wrap())]


def _between(umap: isl.UnionMap, src: str, dst: str) -> isl.Map | None:
    found: list[isl.Map] = []
    umap.foreach_map(lambda m: found.append(m) if (m.get_tuple_name(isl.dim_type.in_) == src and
                                                   m.get_tuple_name(isl.dim_type.out) == dst) else None)
    if not found:
        return None
    out = found[0]
    for m in found[1:]:
        out = out.union(m)
    return out


def _fixed_values(dom: isl.Set, st: Statement, free: Sequence[str],
                  fixed: Mapping[str, int]) -> dict[str, int]:
    """Values for the iterators not in ``free``: the caller's, else the middle of the range that the
    outer choices leave, outermost first."""
    out: dict[str, int] = {}
    for k, it in enumerate(st.iterators):
        if it in free:
            continue
        if it in fixed:
            out[it] = int(fixed[it])
        else:
            values = sorted({p[k] for p in _points(dom)})
            if not values:
                break
            out[it] = values[(len(values) - 1) // 2]
        dom = dom.fix_val(isl.dim_type.set, k, isl.Val(out[it]))
    return out


# -- the picture's data ----------------------------------------------------------------------------------
def iteration_space(program: object, *, params: Mapping[str, int] | None = None, statement: str | None = None,
                    axes: Sequence[str] | None = None, fixed: Mapping[str, int] | None = None,
                    schedule: str = "pluto", fuse: str = "smart", tile: bool = True, tile_size: int | None = 4,
                    kinds: Sequence[str] = ("flow",), options: Mapping[str, Any] | None = None) -> SpaceData:
    """The points, dependences and tiles of a 2-D slice of one statement's iteration space.

    ``params``: values of the parameters (missing ones are :data:`DEFAULT_PARAM`); ``statement``: which
    one (default: the first with the most iterators); ``axes``: the two iterators drawn, outer then inner
    (default: the two innermost); ``fixed``: values of the other iterators (default: the middle of their
    range); ``kinds``: dependence kinds to draw; ``schedule``, ``fuse``, ``tile``, ``tile_size`` and
    ``options``: the schedule drawn (:func:`picture_schedule`)."""
    prog = to_program(program)
    if not prog.statements:
        raise OptionError(f"{prog.name} has no statement to draw")
    values = {p: DEFAULT_PARAM for p in prog.params} | dict(params or {})
    ctx = _fix_params(prog, values)
    st = (max(prog.statements, key=lambda s: len(s.iterators)) if statement is None
          else prog.statement(statement))
    its = st.iterators
    free = tuple(axes) if axes else its[-2:]
    bad = [a for a in free if a not in its]
    if bad or len(free) > 2 or len(set(free)) != len(free) or (len(free) < 2 and len(its) >= 2):
        raise OptionError(f"axes {', '.join(free)}: pick two distinct iterators of {st.name} "
                          f"(its iterators: {', '.join(its) or 'none'})")
    if not free:
        raise OptionError(f"{st.name} has no iterator: there is no iteration space to draw")
    free = tuple(sorted(free, key=its.index))
    unknown = sorted(set(fixed or {}) - set(its))
    if unknown:
        raise OptionError(f"{st.name} has no iterator {', '.join(unknown)} to fix (iterators: {', '.join(its)})")
    for kind in kinds:
        if kind not in DEP_KINDS:
            raise OptionError(f"unknown dependence kind {kind!r}; known: {', '.join(DEP_KINDS)}")
    dom = st.domain.intersect_params(ctx)
    fix = _fixed_values(dom, st, free, dict(fixed or {}))
    for it, v in fix.items():
        dom = dom.fix_val(isl.dim_type.set, its.index(it), isl.Val(v))
    if dom.is_empty():
        raise OptionError(f"the slice {st.name}[{', '.join(f'{i}={fix[i]}' if i in fix else i for i in its)}] "
                          f"is empty for {values}")
    xi, yi = its.index(free[-1]), (its.index(free[0]) if len(free) == 2 else None)

    def xy(c: tuple[int, ...]) -> tuple[int, int]:
        return (c[xi], c[yi] if yi is not None else 0)

    deps = compute_dependences(prog)
    sched, strips = picture_schedule(prog, deps, schedule=schedule, fuse=fuse, tile=tile, tile_size=tile_size,
                                     options=options)
    smap = _between_domain(sched.map, st.name).intersect_domain(dom)
    time = {xy(c): t for c, t in _pairs(smap)}
    points = tuple(sorted(time, key=time.__getitem__))
    arrows = _arrows(deps, st.name, dom, ctx, kinds, xy)
    tiles = _tiles(time, strips, sched) if strips else ()
    log.info("%s: %d points, %d arrows, %d tiles in the slice", st.name, len(points), len(arrows), len(tiles))
    return SpaceData(prog.name, st, (free[-1], free[0] if yi is not None else ""), fix, values, points, time,
                     arrows, tiles, sched, strips, strips[0].size if strips else None, schedule == "compiled")


def _between_domain(umap: isl.UnionMap, name: str) -> isl.Map:
    found: list[isl.Map] = []
    umap.foreach_map(lambda m: found.append(m) if m.get_tuple_name(isl.dim_type.in_) == name else None)
    out = found[0]
    for m in found[1:]:
        out = out.union(m)
    return out


def _arrows(deps: Dependences, name: str, dom: isl.Set, ctx: isl.Set, kinds: Sequence[str],
            to_xy: Callable[[tuple[int, ...]], tuple[int, int]]) -> tuple[Arrow, ...]:
    """Dependences with both ends in the slice: direct ones of every kind asked for, and flow
    dependences through one other statement (S -> X -> S)."""
    seen: set[tuple[tuple[int, int], tuple[int, int]]] = set()
    out: list[Arrow] = []

    def add(m: isl.Map | None, kind: str, via: str | None) -> None:
        if m is None:
            return
        m = m.intersect_params(ctx).intersect_domain(dom).intersect_range(dom)
        for s, t in _pairs(m):
            a, b = to_xy(s), to_xy(t)
            if a != b and (a, b) not in seen:
                seen.add((a, b))
                out.append(Arrow(a, b, kind, via))

    for kind in kinds:
        add(_between(getattr(deps, kind), name, name), kind, None)
    if "flow" in kinds:
        others: set[str] = set()
        deps.flow.foreach_map(lambda m: others.add(m.get_tuple_name(isl.dim_type.out)))
        for x in sorted(others - {name}):
            first, second = _between(deps.flow, name, x), _between(deps.flow, x, name)
            if first is not None and second is not None:
                add(first.intersect_params(ctx).apply_range(second.intersect_params(ctx)), "flow", x)
    return tuple(out)


def _tiles(time: dict[tuple[int, int], tuple[int, ...]], strips: tuple[Strip, ...],
           sched: Schedule) -> tuple[Tile, ...]:
    """The tiles of the slice in execution order, with their waves and polygons."""
    last = max(st.tile for st in strips)
    groups: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for p, t in time.items():
        groups.setdefault(t[:last + 1], []).append(p)
    keys = sorted(groups)
    varying = [d for d in range(last + 1) if len({k[d] for k in keys}) > 1]
    par = next((st.tile for st in strips if st.tile in varying and sched.parallel[st.tile]), None)
    waves = sorted({k[:par] for k in keys}) if par is not None else keys
    wave_of = {w: n + 1 for n, w in enumerate(waves)}
    points = list(time)
    domain = padded_hull(points)
    fits = {st.point: tuple(round(v) for v in fit_affine(points, [time[p][st.point] for p in points]))
            for st in strips}
    exact = all(a * x + b * y + c == time[(x, y)][st.point]
                for st in strips for (a, b, c) in [fits[st.point]] for (x, y) in points)
    out = []
    for n, key in enumerate(keys):
        members = tuple(sorted(groups[key], key=time.__getitem__))
        if not exact:  # a degenerate slice (points on one line): outline the points themselves
            out.append(Tile(n + 1, key, members, wave_of[key[:par]] if par is not None else n + 1,
                            tuple(padded_hull(members, 0.3))))
            continue
        poly = list(domain)
        for st in strips:
            a, b, c = fits[st.point]
            g = math.gcd(a, b)
            if g == 0:  # constant on the slice: the fixed iterators decide, nothing to cut
                continue
            lo = (time[members[0]][st.point] // st.size) * st.size
            # phi takes the values c + g*k on the slice: cut halfway between the last value of one tile
            # and the first of the next, so neighbouring tiles share their edge
            first = c + g * -((c - lo) // g)
            last = c + g * ((lo + st.size - 1 - c) // g)
            poly = clip(poly, a, b, last + g / 2 - c)
            poly = clip(poly, -a, -b, -(first - g / 2 - c))
        out.append(Tile(n + 1, key, members, wave_of[key[:par]] if par is not None else n + 1, tuple(poly)))
    return tuple(out)
