"""The host plan: which parts of the loop AST become kernel launches, and the Python that launches them.

Walking the loop AST from the top: a parallel loop starts a kernel (its grid loops are it and the
parallel loops perfectly nested inside, see :func:`grid_chain`); a sequential loop with a parallel loop
inside stays on the host, one launch sequence per iteration (a time loop of a stencil: its iterations
need a grid-wide barrier, which only the end of a launch gives); a sequential loop without parallel loops
inside, and a statement outside any loop, run in a kernel of one program.  Guards outside kernels are
Python ``if`` on parameters and host counters.

The grid of a launch is sized from the bounding box of its loops, computed exactly with isl as a
function of the parameters and the host counters; the kernel masks the box to the iteration domain.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import islpy as isl

from ..ir.expr import Expr
from ..ir.program import Program
from ..schedule.loop_ast import Block, For, If, Node, Run, isl_expr, walk
from ..schedule.schedule import Schedule
from .block_fit import most_iterations
from .kgen import KernelSpec, kernel_parameters, upper_exclusive
from .launches import grid_chain, has_parallel
from .texpr import index_text, user

log = logging.getLogger("polytri.triton")


@dataclass(frozen=True)
class Launch:
    """One kernel launch site of the host code."""

    spec: KernelSpec
    """The kernel."""
    box: tuple[tuple[Expr, Expr], ...]
    """Lowest and highest value of each grid loop (in parameters and host counters)."""


def _statements(n: Node) -> set[str]:
    return {r.statement for r in walk(n) if isinstance(r, Run)}


def loop_box(program: Program, schedule: Schedule, node: Node, host_dims: list[int],
             dims: list[int]) -> list[tuple[Expr, Expr]]:
    """Exact lowest and highest value of time dimensions ``dims`` over the statements under ``node``, as
    functions of the parameters and of the host loops' counters (time dimensions ``host_dims``)."""
    stmts = _statements(node)
    scheduled = schedule.map.intersect_domain(program.domain).get_map_list()
    maps = [scheduled.get_at(i) for i in range(scheduled.n_map())]
    maps = [m for m in maps if m.get_tuple_name(isl.dim_type.in_) in stmts]
    points = maps[0].range()
    for m in maps[1:]:
        points = points.union(m.range())
    points = points.intersect_params(program.context)
    nparam = points.dim(isl.dim_type.param)
    for h in sorted(host_dims, reverse=True):
        points = points.move_dims(isl.dim_type.param, nparam, isl.dim_type.set, h, 1)
        points = points.set_dim_name(isl.dim_type.param, nparam, f"c{h}")
    build = isl.AstBuild.from_context(isl.Set.universe(points.get_space().params()))
    out = []
    for d in dims:
        pos = d - sum(1 for h in host_dims if h < d)
        lo, hi = points.dim_min(pos).coalesce(), points.dim_max(pos).coalesce()
        out.append((isl_expr(build.expr_from_pw_aff(lo), program.params),
                    isl_expr(build.expr_from_pw_aff(hi), program.params)))
    return out


class HostPlanner:
    """Splits a loop AST into launches and prints the host function ``pt_host``."""

    def __init__(self, program: Program, schedule: Schedule, vector_sides):
        self.p = program
        self.schedule = schedule
        self.vector_sides = vector_sides
        """``(chain, body, trips) -> block sides`` of the innermost grid loops (the launch model); ``trips``:
        each grid loop's most iterations where a constant bounds them, else ``None``."""
        self.launches: list[Launch] = []
        self.lines: list[str] = []

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def plan(self, ast: Node) -> str:
        args = ["pt__launch"] + [user(a.name) for a in self.p.arrays] + [f"pt__s_{s.name}" for s in self.p.scalars]
        args += [user(p) for p in self.p.params]
        self.emit(0, f"def pt_host({', '.join(args)}):")
        self.emit(1, f'"""Run program {self.p.name}: {len(self.p.statements)} statement(s)."""')
        start = len(self.lines)
        self.node(ast, 1, [])
        if len(self.lines) == start:
            self.emit(1, "pass")
        return "\n".join(self.lines) + "\n"

    def node(self, n: Node, depth: int, host: list[For]) -> None:
        if isinstance(n, Block):
            for c in n.body:
                self.node(c, depth, host)
        elif isinstance(n, If):
            self.emit(depth, f"if {index_text(n.cond, {}, device=False)}:")
            self.node(n.then, depth + 1, host)
            if n.orelse is not None:
                self.emit(depth, "else:")
                self.node(n.orelse, depth + 1, host)
        elif isinstance(n, For) and n.parallel:
            self.launch(grid_chain(n), depth, host)
        elif isinstance(n, For) and has_parallel(n.body):
            lo = index_text(n.lower, {}, device=False)
            hi = index_text(upper_exclusive(n), {}, device=False)
            self.emit(depth, f"for {n.var} in range({lo}, {hi}, {n.step}):")
            self.node(n.body, depth + 1, host + [n])
        else:
            self.single(n, depth, host)

    def _spec(self, chain: tuple[For, ...], body: Node, host: list[For],
              trips: tuple[int | None, ...] = ()) -> KernelSpec:
        name = f"{self.p.name}_k{len(self.launches)}"
        sides = self.vector_sides(chain, body, trips) if chain else ()
        flattened = tuple(range(len(chain) - 2)) if len(chain) > 3 else ()
        return KernelSpec(name, chain, sides, body, tuple(h.var for h in host), flattened)

    def single(self, n: Node, depth: int, host: list[For]) -> None:
        spec = self._spec((), n, host)
        self.launches.append(Launch(spec, ()))
        self.emit(depth, f"pt__launch({spec.name}, (1, 1, 1), ({', '.join(kernel_parameters(self.p, spec))},))")

    def launch(self, chain: tuple[For, ...], depth: int, host: list[For]) -> None:
        body = chain[-1].body
        box = loop_box(self.p, self.schedule, chain[0], [h.dim for h in host], [c.dim for c in chain])
        most = tuple(None if (n := most_iterations(lo, hi)) is None else n + 1 for lo, hi in box)
        spec = self._spec(chain, body, host, most)
        self.launches.append(Launch(spec, tuple(box)))
        counts = []
        rank = len(spec.vector)
        for i, (loop, (lo, hi)) in enumerate(zip(chain, box)):
            lo_t, hi_t = index_text(lo, {}, device=False), index_text(hi, {}, device=False)
            self.emit(depth, f"pt__lo{loop.dim} = {lo_t}")
            trips = f"max(0, {hi_t} - pt__lo{loop.dim} + 1)"  # unit stride: steps are masked in the kernel
            if i >= len(chain) - rank:
                side = spec.vector[i - (len(chain) - rank)]
                trips = f"({trips} + {side - 1}) // {side}"
            self.emit(depth, f"pt__n{loop.dim} = {trips}")
            counts.append(f"pt__n{loop.dim}")
        unflat = [counts[i] for i in range(len(chain)) if i not in spec.flattened]
        axes = list(reversed(unflat))
        if spec.flattened:
            axes.append(" * ".join(counts[i] for i in spec.flattened))
        axes += ["1"] * (3 - len(axes))
        self.emit(depth, f"if {' and '.join(f'pt__n{c.dim} > 0' for c in chain)}:")
        self.emit(depth + 1, f"pt__launch({spec.name}, ({', '.join(axes)}), "
                             f"({', '.join(kernel_parameters(self.p, spec))},))")
        log.debug("%s: grid loops %s, blocks %s", spec.name, [c.var for c in chain], spec.vector)
