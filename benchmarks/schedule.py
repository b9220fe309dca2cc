"""Scheduler benchmark: polytri's Pluto-style scheduler beside isl's own, on every kernel of the suite.

    python benchmarks/schedule.py [--kernels gemm,lu] [--repeat 3] [--markdown]

For each kernel it times ``compute_dependences`` + ``pluto_schedule`` and isl's
``ScheduleConstraints.compute_schedule`` on the same dependences (validity = coincidence = proximity =
all dependences), and reports the shape of both schedules: permutable bands, their widths, and the
parallel loop dimensions.  ``benchmarks/README.md`` explains every column.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import islpy as isl

from polytri.ir.builder import to_program
from polytri.ir.program import Program
from polytri.schedule.dependences import Dependences, compute_dependences
from polytri.schedule.pluto import pluto_schedule
from polytri.schedule.schedule import Schedule, parallel_dimensions
from polytri.suite import KERNELS

NOTE = "ratios, not absolute times, are what to compare; this machine is shared and noisy"
ERROR = "error"

T = TypeVar("T")


# -- shapes of the two schedules ----------------------------------------------------------------------
@dataclass(frozen=True)
class PlutoShape:
    """What the benchmark reports about a polytri schedule."""

    bands: int
    widths: str
    """Band widths in time order, ``3+1``."""
    max_width: int
    parallel: int
    """Loop (non-scalar) dimensions that carry no dependence of any statement (``Schedule.parallel``)."""
    parallel_nest: int
    """Most parallel loops around one statement, each loop judged only by the dependences among the
    statements it encloses (those that agree with it on every earlier scalar dimension)."""
    outer_parallel: bool
    """The outermost loop dimension carries no dependence."""


_CONSTANT = re.compile(r"-?\d+")


def _nest_parallelism(program: Program, deps: Dependences, sched: Schedule) -> int:
    """:attr:`PlutoShape.parallel_nest`: a distribution (scalar dimension) gives each group of statements
    its own loops below it, so a loop dimension can be parallel in one nest and not in another."""
    if not sched.rows:
        return 0
    names = [st.name for st in program.statements]
    domains = {st.name: isl.UnionSet.from_set(st.domain) for st in program.statements}
    empty = isl.UnionMap.empty(deps.all.get_space())
    cache: dict[frozenset[str], tuple[bool, ...]] = {}

    def par(group: frozenset[str]) -> tuple[bool, ...]:
        if group not in cache:
            dom = isl.UnionSet.empty(program.domain.get_space())
            for n in group:
                dom = dom.union(domains[n])
            sub = Dependences(deps.all.intersect_domain(dom).intersect_range(dom), empty, empty)
            cache[group] = parallel_dimensions(sched.map.intersect_domain(dom), sub)
        return cache[group]

    best = 0
    for name in names:
        count = 0
        for k, row in enumerate(sched.rows):
            if sched.scalar[k] or _CONSTANT.fullmatch(row[name].strip()):
                continue
            group = frozenset(t for t in names
                              if all(sched.rows[j][t] == sched.rows[j][name]
                                     for j in range(k) if sched.scalar[j]))
            count += par(group)[k]
        best = max(best, count)
    return best


def pluto_shape(program: Program, deps: Dependences, sched: Schedule) -> PlutoShape:
    widths = [b.width for b in sched.bands]
    loops = [k for k in range(sched.ndim) if not (sched.scalar and sched.scalar[k])]
    parallel = sum(1 for k in loops if sched.parallel[k])
    outer = bool(loops) and sched.parallel[loops[0]]
    return PlutoShape(len(widths), "+".join(map(str, widths)) or "-", max(widths, default=0), parallel,
                      max(parallel, _nest_parallelism(program, deps, sched)), outer)


@dataclass(frozen=True)
class IslShape:
    """What the benchmark reports about an isl schedule tree."""

    bands: int
    widths: str
    """Band widths: ``+`` nests a band inside another, ``|`` separates the children of a sequence or set
    node, ``(..)`` groups them: ``1+(2|1)``."""
    max_permutable: int
    """Widest band that is permutable (a one-member band counts: it is trivially permutable)."""
    coincident: int
    """Coincident (parallel) band members in the whole tree."""
    coincident_path: int
    """Most coincident band members on one root-to-leaf path (the loops around one statement)."""
    outer_parallel: bool
    """The first member of every outermost band is coincident."""


@dataclass
class _Walk:
    bands: int = 0
    max_permutable: int = 0
    coincident: int = 0
    outermost: list[bool] = field(default_factory=list)


def _children(node: isl.ScheduleNode) -> list[isl.ScheduleNode]:
    return [node.child(i) for i in range(node.n_children())]


def _walk(node: isl.ScheduleNode, acc: _Walk, outer: bool) -> tuple[str, int]:
    """Return (widths text, most coincident members on one path) for the subtree at ``node``."""
    kind = node.get_type()
    if kind == isl.schedule_node_type.band:
        n = node.band_n_member()
        coinc = sum(1 for i in range(n) if node.band_member_get_coincident(i))
        acc.bands += 1
        acc.coincident += coinc
        if n == 1 or node.band_get_permutable():
            acc.max_permutable = max(acc.max_permutable, n)
        if outer:
            acc.outermost.append(n > 0 and bool(node.band_member_get_coincident(0)))
        below = [_walk(c, acc, False) for c in _children(node)]
        text = "".join(f"+{t}" for t, _ in below if t)
        return f"{n}{text}", coinc + max((p for _, p in below), default=0)
    below = [_walk(c, acc, outer) for c in _children(node)]
    parts = [t for t, _ in below if t]
    path = max((p for _, p in below), default=0)
    if len(parts) > 1:
        return "(" + "|".join(parts) + ")", path
    return (parts[0] if parts else ""), path


def isl_shape(sched: isl.Schedule) -> IslShape:
    acc = _Walk()
    widths, path = _walk(sched.get_root(), acc, True)
    return IslShape(acc.bands, widths or "-", acc.max_permutable, acc.coincident, path,
                    bool(acc.outermost) and all(acc.outermost))


def isl_schedule(program: Program, deps: Dependences) -> isl.Schedule:
    """isl's scheduler on the program's domain, every dependence as validity, coincidence and proximity."""
    every = deps.all
    sc = (isl.ScheduleConstraints.on_domain(program.domain)
          .set_validity(every).set_coincidence(every).set_proximity(every)
          .set_context(program.context))
    sched = sc.compute_schedule()
    if sched is None:
        raise RuntimeError("isl returned no schedule")
    return sched


# -- measuring ----------------------------------------------------------------------------------------
@dataclass
class Row:
    """One kernel's measurements (``None``/errors where a scheduler failed)."""

    kernel: str
    statements: int
    deps_s: float | None = None
    pluto_s: float | None = None
    """Median of ``compute_dependences`` + ``pluto_schedule``."""
    pluto_only_s: float | None = None
    isl_s: float | None = None
    pluto: PlutoShape | None = None
    isl: IslShape | None = None
    pluto_error: str = ""
    isl_error: str = ""

    @property
    def ratio(self) -> float | None:
        """Scheduler-only time ratio, polytri / isl (dependence analysis excluded on both sides)."""
        if self.pluto_only_s is None or not self.isl_s:
            return None
        return self.pluto_only_s / self.isl_s

    def comparison(self) -> str:
        """Where polytri's schedule differs in shape from isl's (words, or ``=``)."""
        p, i = self.pluto, self.isl
        if p is None or i is None:
            return "-"
        words = []
        if p.max_width < i.max_permutable:
            words.append("narrower")
        elif p.max_width > i.max_permutable:
            words.append("wider")
        if p.parallel_nest < i.coincident_path:
            words.append("fewer-par")
        elif p.parallel_nest > i.coincident_path:
            words.append("more-par")
        if p.parallel_nest > p.parallel:
            words.append("par-hidden")
        if i.outer_parallel and not p.outer_parallel:
            words.append("outer-seq")
        elif p.outer_parallel and not i.outer_parallel:
            words.append("outer-par")
        return " ".join(words) or "="

    @property
    def worse(self) -> bool:
        return any(w in self.comparison().split() for w in ("narrower", "fewer-par", "outer-seq"))


def _timed(fn: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return text[:160]


def measure(name: str, repeat: int) -> Row:
    """Schedule kernel ``name`` ``repeat`` times with both schedulers."""
    program = to_program(KERNELS[name].build())
    row = Row(name, len(program.statements))
    deps_t: list[float] = []
    pluto_t: list[float] = []
    isl_t: list[float] = []
    for _ in range(repeat):
        deps, td = _timed(partial(compute_dependences, program))
        deps_t.append(td)
        if not row.pluto_error:
            try:
                sched, tp = _timed(partial(pluto_schedule, program, deps))
                pluto_t.append(tp)
                if row.pluto is None:  # the schedule is the same every run
                    row.pluto = pluto_shape(program, deps, sched)
            except Exception as exc:  # a benchmark reports failures, it does not stop on them
                row.pluto_error, row.pluto = _short(exc), None
        if not row.isl_error:
            try:
                tree, ti = _timed(partial(isl_schedule, program, deps))
                isl_t.append(ti)
                if row.isl is None:
                    row.isl = isl_shape(tree)
            except Exception as exc:
                row.isl_error, row.isl = _short(exc), None
    row.deps_s = statistics.median(deps_t)
    if not row.pluto_error:
        row.pluto_only_s = statistics.median(pluto_t)
        row.pluto_s = statistics.median(d + p for d, p in zip(deps_t, pluto_t))
    if not row.isl_error:
        row.isl_s = statistics.median(isl_t)
    return row


# -- printing -----------------------------------------------------------------------------------------
HEADER = ("kernel", "stmts", "deps s", "pt s", "pt bands", "pt widths", "pt max", "pt par", "pt outer",
          "isl s", "isl bands", "isl widths", "isl max", "isl par", "isl outer", "sched ratio", "pt vs isl")
#: Columns aligned to the right (numbers).
NUMERIC = {1, 2, 3, 4, 6, 7, 9, 10, 12, 13, 15}


def _s(x: float | None) -> str:
    return ERROR if x is None else f"{x:.4f}"


def _yn(b: bool) -> str:
    return "yes" if b else "no"


def cells(row: Row) -> list[str]:
    out = [row.kernel, str(row.statements), _s(row.deps_s)]
    if row.pluto is None:
        out += [ERROR] * 6
    else:
        p = row.pluto
        par = str(p.parallel) if p.parallel == p.parallel_nest else f"{p.parallel} ({p.parallel_nest})"
        out += [_s(row.pluto_s), str(p.bands), p.widths, str(p.max_width), par, _yn(p.outer_parallel)]
    if row.isl is None:
        out += [ERROR] * 6
    else:
        i = row.isl
        par = str(i.coincident) if i.coincident == i.coincident_path else f"{i.coincident} ({i.coincident_path})"
        out += [_s(row.isl_s), str(i.bands), i.widths, str(i.max_permutable), par, _yn(i.outer_parallel)]
    ratio = row.ratio
    out += ["-" if ratio is None else f"{ratio:.1f}x", row.comparison()]
    return out


def summary(rows: list[Row]) -> str:
    pt = [r.pluto_s for r in rows if r.pluto_s is not None]
    il = [r.isl_s for r in rows if r.isl_s is not None]
    ratios = [r.ratio for r in rows if r.ratio is not None]
    worse = [r.kernel for r in rows if r.worse]
    hidden = [r.kernel for r in rows if "par-hidden" in r.comparison().split()]
    errors = [f"{r.kernel} (polytri: {r.pluto_error})" for r in rows if r.pluto_error]
    errors += [f"{r.kernel} (isl: {r.isl_error})" for r in rows if r.isl_error]
    parts = [
        f"{len(rows)} kernels",
        f"total pt s {sum(pt):.3f}",
        f"total isl s {sum(il):.3f}",
        f"median sched ratio {statistics.median(ratios):.1f}x" if ratios else "median sched ratio -",
        f"polytri schedule worse in shape than isl's on {len(worse)}: {', '.join(worse) or 'none'}",
        f"per-nest parallel loops that the global Schedule.parallel flags miss (the code generator checks each loop itself) on {len(hidden)}: {', '.join(hidden) or 'none'}",
        f"errors: {'; '.join(errors) or 'none'}",
    ]
    return "; ".join(parts) + f".\nNote: {NOTE}."


def render_text(rows: list[Row]) -> str:
    table = [list(HEADER)] + [cells(r) for r in rows]
    widths = [max(len(line[c]) for line in table) for c in range(len(HEADER))]

    def fmt(line: list[str]) -> str:
        return "  ".join(v.rjust(w) if c in NUMERIC else v.ljust(w)
                         for c, (v, w) in enumerate(zip(line, widths))).rstrip()

    lines = [fmt(table[0]), "  ".join("-" * w for w in widths)] + [fmt(line) for line in table[1:]]
    return "\n".join(lines) + "\n" + summary(rows)


def render_markdown(rows: list[Row]) -> str:
    def fmt(line: Sequence[str]) -> str:
        return "| " + " | ".join(v.replace("|", "\\|") for v in line) + " |"

    align = ["---:" if c in NUMERIC else "---" for c in range(len(HEADER))]
    lines = [fmt(HEADER), "|" + "|".join(align) + "|"] + [fmt(cells(r)) for r in rows]
    return "\n".join(lines) + "\n\n" + summary(rows)


# -- command line -------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default="",
                        help=f"comma-separated kernel names (default: all {len(KERNELS)})")
    parser.add_argument("--repeat", type=int, default=3, help="runs per kernel; the median is reported")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    names = [k.strip() for k in args.kernels.split(",") if k.strip()] or list(KERNELS)
    unknown = [k for k in names if k not in KERNELS]
    if unknown:
        parser.error(f"unknown kernel(s) {', '.join(unknown)}; known: {', '.join(KERNELS)}")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    rows = [measure(name, args.repeat) for name in names]
    print(render_markdown(rows) if args.markdown else render_text(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
