"""The statement dependence graph and the fusion groups of a schedule (data, no drawing here).

Nodes are statements, in the order the schedule first runs them; an edge ``S -> T`` of kind flow, anti
or output exists when some instance of ``T`` depends on one of ``S``, labelled with the array it goes
through.  A *fusion group* is a set of statements that share the outermost loop of the schedule: they
agree on every scalar (distribution) dimension before the first loop dimension.  Each group records
how many loops all its members share.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ..ir.expr import accesses
from ..ir.program import Program, Statement
from ..schedule.dependences import Dependences
from ..schedule.schedule import Schedule


@dataclass(frozen=True)
class Edge:
    """Dependences of one kind from one statement to another (or itself)."""

    source: str
    target: str
    kind: str
    """``flow``, ``anti`` or ``output``."""
    arrays: tuple[str, ...]
    """The arrays the dependences go through."""


@dataclass(frozen=True)
class Group:
    """Statements sharing the schedule's outermost loop."""

    statements: tuple[str, ...]
    shared_loops: int
    """Number of loops every member shares (for a group of one statement: its depth)."""


@dataclass(frozen=True)
class GraphData:
    """Everything the dependence-graph picture shows."""

    program: str
    statements: tuple[Statement, ...]
    """In the schedule's order."""
    edges: tuple[Edge, ...]
    groups: tuple[Group, ...]
    schedule: Schedule


def _statement_values(sched: Schedule, names: list[str]) -> dict[str, tuple[int | None, ...]]:
    """Per statement, its constant value on each scalar dimension (``None`` on loop dimensions)."""
    out: dict[str, tuple[int | None, ...]] = {}

    def visit(m: isl.Map) -> None:
        name = m.get_tuple_name(isl.dim_type.in_)
        vals: list[int | None] = []
        for d in range(m.dim(isl.dim_type.out)):
            scalar = d < len(sched.scalar) and sched.scalar[d]
            if not scalar:
                vals.append(None)
                continue
            rng = m.range()
            proj = rng.project_out(isl.dim_type.set, d + 1, rng.dim(isl.dim_type.set) - d - 1)
            proj = proj.project_out(isl.dim_type.set, 0, d)
            point = proj.sample_point()  # a scalar dimension is one constant per statement
            vals.append(int(point.get_coordinate_val(isl.dim_type.set, 0).to_python()))
        out[name] = tuple(vals)

    sched.map.foreach_map(visit)
    return {n: out.get(n, ()) for n in names}


def _shared_loops(values: list[tuple[int | None, ...]], scalar: tuple[bool, ...], ndim: int) -> int:
    """Loop dimensions before the first scalar dimension on which the members differ."""
    loops = 0
    for d in range(ndim):
        if d < len(scalar) and scalar[d]:
            if len({v[d] for v in values}) > 1:
                break
        else:
            loops += 1
    return loops


def fusion_groups(program: Program, sched: Schedule) -> tuple[list[str], tuple[Group, ...]]:
    """The statements in schedule order, and their fusion groups (see the module's docstring)."""
    names = [s.name for s in program.statements]
    vals = _statement_values(sched, names)
    first_loop = next((d for d in range(sched.ndim) if not (d < len(sched.scalar) and sched.scalar[d])), sched.ndim)
    order = sorted(names, key=lambda n: (tuple(v if v is not None else 0 for v in vals[n]), names.index(n)))
    groups: dict[tuple[int | None, ...], list[str]] = {}
    for n in order:
        groups.setdefault(vals[n][:first_loop], []).append(n)
    out = []
    for members in groups.values():
        depth = min(len(program.statement(n).iterators) for n in members)
        shared = _shared_loops([vals[n] for n in members], sched.scalar, sched.ndim)
        out.append(Group(tuple(members), min(shared, depth)))
    return order, tuple(out)


def dependence_graph(program: Program, deps: Dependences, sched: Schedule) -> GraphData:
    """Statements, dependence edges and fusion groups of ``program`` under ``sched``."""
    order, groups = fusion_groups(program, sched)
    edges: list[Edge] = []
    for kind in ("flow", "anti", "output"):
        maps: list[isl.Map] = []
        getattr(deps, kind).foreach_map(maps.append)
        pairs = {(m.get_tuple_name(isl.dim_type.in_), m.get_tuple_name(isl.dim_type.out)) for m in maps}
        for src, dst in sorted(pairs, key=lambda p: (order.index(p[0]), order.index(p[1]))):
            edges.append(Edge(src, dst, kind, _arrays(program.statement(src), program.statement(dst), kind)))
    stmts = tuple(program.statement(n) for n in order)
    return GraphData(program.name, stmts, tuple(edges), groups, sched)


def _arrays(src: Statement, dst: Statement, kind: str) -> tuple[str, ...]:
    """Arrays that can carry a dependence of ``kind`` from ``src`` to ``dst``."""
    def reads(s: Statement) -> set[str]:
        return {a.array for a in accesses(s.value)}

    if kind == "flow":
        found = {src.target.array} & reads(dst)
    elif kind == "anti":
        found = reads(src) & {dst.target.array}
    else:
        found = {src.target.array} & {dst.target.array}
    return tuple(sorted(found))
