"""Repeated stretches of a graph, so that a cut taken in one repetition is taken in all of them.

A model built from identical blocks (a transformer's layers, a stack of residual units) traces to an FX
graph in which the same sequence of ops recurs.  The planner cuts programs that hold too many statements
at their middle, counted from the previous cut; left alone, the cuts drift from one block to the next and
every block compiles its own kernels.  :func:`find_repeats` finds the stretches of the graph where the
node sequence repeats with a period, and :meth:`Repeats.images` gives, for a cut at one node, the nodes at
the same place in the other repetitions: the planner cuts there too, so the blocks are cut alike and the
structure cache (:mod:`.torch_structure`) compiles their programs once.

Two nodes match when they call the same op on equal non-tensor arguments, produce values of the same
shape and type, and take tensor inputs of the same shapes and types, graph inputs (a block's weights) where
the other takes graph inputs.  Where computed inputs come from is not compared: the blocks of a model read
values computed once before them (an attention mask) at a distance that grows from block to block, and the
first block reads something else than the next ones (an embedding, a dropout's copy).  A loose match costs
nothing but sharing: a cut is legal wherever it is taken.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch.fx as fx

from ..pipeline.decisions import Decision
from .torch_lower import SegmentLowering, describe_value, op_name

log = logging.getLogger("polytri.torch")


@dataclass(frozen=True)
class Region:
    """Nodes ``start`` to ``end`` (positions, end excluded) repeat every ``period`` nodes."""

    start: int
    end: int
    period: int

    @property
    def count(self) -> int:
        """How many repetitions (the last may be partial)."""
        return -(-(self.end - self.start) // self.period)


@dataclass(frozen=True)
class Repeats:
    """The repeated regions of a graph and the position of each of its nodes."""

    nodes: tuple[fx.Node, ...]
    regions: tuple[Region, ...]
    positions: Mapping[fx.Node, int]

    def region_of(self, node: fx.Node) -> Region | None:
        k = self.position(node)
        return next((r for r in self.regions if k is not None and r.start <= k < r.end), None)

    def position(self, node: fx.Node) -> int | None:
        return self.positions.get(node)

    def images(self, node: fx.Node, every: int = 1) -> list[fx.Node]:
        """The nodes at ``node``'s place in the other repetitions of its region, every ``every``-th one
        (none outside a region)."""
        k, region = self.position(node), self.region_of(node)
        if k is None or region is None:
            return []
        step = region.period * max(1, every)
        first = region.start + (k - region.start) % step
        return [self.nodes[j] for j in range(first, region.end, step) if j != k]


def _describe(v: Any) -> Any:
    """:func:`.torch_lower.describe_value` of a value or of each of a node's several values."""
    if isinstance(v, (tuple, list)):
        return tuple(_describe(x) for x in v)
    return describe_value(v)


def _signature(node: fx.Node) -> Any:
    """What must agree for two nodes to be the same place in two repetitions."""
    def arg(a: Any) -> Any:
        if isinstance(a, fx.Node):
            return (a.op == "placeholder", _describe(a.meta.get("val")))
        if isinstance(a, (tuple, list)):
            return tuple(arg(x) for x in a)
        if isinstance(a, dict):
            return tuple(sorted((k, arg(x)) for k, x in a.items()))
        return repr(a)
    return (op_name(node), arg(node.args), arg(node.kwargs), _describe(node.meta.get("val")))


def _best_region(codes: np.ndarray, lo: int, hi: int, min_period: int) -> Region | None:
    """The region in ``codes[lo:hi]`` that covers the most nodes, repeating with a period of at least
    ``min_period`` nodes for at least one and a half periods (the shortest period among equals)."""
    best: Region | None = None
    for p in range(min_period, (hi - lo) // 2 + 1):
        eq = np.concatenate(([False], codes[lo:hi - p] == codes[lo + p:hi], [False]))
        edges = np.flatnonzero(np.diff(eq.astype(np.int8)))
        if len(edges) == 0:
            continue
        starts, ends = edges[0::2], edges[1::2]
        k = int(np.argmax(ends - starts))
        run = int(ends[k] - starts[k])
        if 2 * run >= p and (best is None or run + p > best.end - best.start):
            best = Region(lo + int(starts[k]), lo + int(starts[k]) + run + p, p)
    return best


def find_repeats(graph: fx.Graph, min_period: int = 2) -> Repeats:
    """The repeated regions of ``graph`` (see the module docstring): the widest one, then the widest ones
    in what remains before and after it, and so on."""
    nodes = tuple(n for n in graph.nodes if n.op not in ("placeholder", "get_attr", "output"))
    ids: dict[Any, int] = {}
    codes = np.array([ids.setdefault(_signature(n), len(ids)) for n in nodes], dtype=np.int64)
    regions: list[Region] = []
    todo = [(0, len(nodes))]
    while todo:
        lo, hi = todo.pop()
        r = _best_region(codes, lo, hi, min_period)
        if r is None:
            continue
        regions.append(r)
        todo += [(lo, r.start), (r.end, hi)]
    for r in regions:
        log.debug("nodes %s to %s repeat every %d nodes", nodes[r.start].name, nodes[r.end - 1].name, r.period)
    return Repeats(nodes, tuple(sorted(regions, key=lambda r: r.start)), {n: k for k, n in enumerate(nodes)})


def repeated_cuts(repeats: Repeats, lowering: SegmentLowering, node: fx.Node,
                  limit: int) -> tuple[Decision, dict[fx.Node, Decision]]:
    """The record of a cut before ``node`` (where ``lowering``'s segment is cut in two) and the cuts at
    its images in the other repetitions, each with its record.  A repetition that holds fewer than
    ``limit`` statements is cut every few repetitions only, so that a program still holds about ``limit``
    statements."""
    nodes = lowering.segment.nodes
    asked = [n for n in nodes[1:] if n in lowering.starts]
    why = (f"the handler of {asked[0].name} asked for a program start" if asked else
           f"the program had {len(lowering.statements)} statements, more than {limit}")
    origin = Decision("lowering", "program-cut", node.name, f"program cut before {node.name}: {why}",
                      {"statements": len(lowering.statements), "limit": limit,
                       "asked": asked[0].name if asked else None})
    region = repeats.region_of(node)
    if region is None:
        return origin, {}
    per = _statements_per_period(repeats, lowering, region)
    every = max(1, limit // per) if per else 1
    text = (f"program cut before {{}}: the graph repeats every {region.period} nodes ({region.count} times), "
            f"and the cut before {node.name} is taken at the same place every {every} repetition(s)")
    data = {"origin": node.name, "period": region.period, "repetitions": region.count, "every": every,
            "statements_per_repetition": per}
    return origin, {m: Decision("lowering", "repeated-cut", m.name, text.format(m.name), data)
                    for m in repeats.images(node, every)}


def _statements_per_period(repeats: Repeats, lowering: SegmentLowering, region: Region) -> int | None:
    """The statements one repetition of ``region`` holds in ``lowering``'s program, on average over the
    program's nodes in the region, if the program holds a whole repetition's worth of nodes (``None``
    otherwise: a repetition holds more statements than the program)."""
    inside = {n for n in lowering.segment.nodes
              if (k := repeats.position(n)) is not None and region.start <= k < region.end}
    if len(inside) < region.period:
        return None
    owned = sum(1 for _, _, owner in lowering.statements if owner in inside)
    return max(1, round(owned * region.period / len(inside)))


__all__ = ["Region", "Repeats", "find_repeats", "repeated_cuts"]
