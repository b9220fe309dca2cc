"""Planning a graph: which nodes run in polytri programs (segments) and which in eager.

Nodes without a handler run in eager.  A node whose handler declines (a :class:`LoweringError`: an
unsupported argument, a dynamic size that is not affine) is moved to eager and the graph is planned
again, so the lowered part only ever contains nodes that lowered completely.
"""

from __future__ import annotations

import hashlib
import logging
import operator
from collections.abc import Collection
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from ..errors import PolytriError
from ..ir.builder import ProgramBuilder
from ..pipeline.decisions import Decision
from . import (  # noqa: F401 (handlers)
    torch_ops_conv,
    torch_ops_index,
    torch_ops_linalg,
    torch_ops_nn,
    torch_ops_pointwise,
    torch_ops_quant,
    torch_ops_reduce,
    torch_ops_view,
)
from .torch_lower import (
    HANDLERS,
    Segment,
    SegmentLowering,
    is_lowerable,
    is_view,
    node_users,
    op_name,
    tensor_meta,
)
from .torch_options import TorchOptions
from .torch_repeat import find_repeats, repeated_cuts
from .torch_symbolic import symbol_of
from .torch_values import LoweringError

log = logging.getLogger("polytri.torch")


@dataclass
class Step:
    """One step of a plan: a segment (``segment`` set) or one node run in eager."""

    segment: Segment | None = None
    node: fx.Node | None = None


@dataclass
class Plan:
    """A graph cut into polytri segments and eager nodes, in execution order."""

    steps: list[Step]
    eager: list[fx.Node]
    """Tensor nodes that run in eager (the fallback ops)."""
    params: dict[str, tuple[fx.Node, int | None]] = field(default_factory=dict)
    """Each dynamic size: the placeholder that carries it (a SymInt, or a tensor and its dimension)."""
    declined: dict[str, str] = field(default_factory=dict)
    """Why a node with a handler runs in eager, by node name."""

    @property
    def segments(self) -> list[Segment]:
        return [s.segment for s in self.steps if s.segment is not None]


def _is_host(node: fx.Node) -> bool:
    """A node computing a Python number (sizes of dynamic shapes and their arithmetic)."""
    return node.op == "call_function" and not isinstance(node.meta.get("val"), (torch.Tensor, tuple, list)) \
        and node.meta.get("val") is not None


#: Programs with more statements than this are cut in two (the scheduler's time grows quickly with the
#: number of statements; a transformer block as one program takes minutes).
MAX_STATEMENTS = 16


def _cut(graph: fx.Graph, eager: set[fx.Node], splits: Collection[fx.Node]) -> list[Step]:
    steps: list[Step] = []
    hoisted: list[Step] = []
    current: list[fx.Node] = []
    available: set[fx.Node] = set()

    def close() -> None:
        if current:
            steps.append(Step(segment=Segment(list(current))))
            available.update(current)
            current.clear()
    for node in graph.nodes:
        if node.op in ("placeholder", "get_attr"):
            available.add(node)
            continue
        if node.op == "output":
            break
        if _is_host(node) and all(a in available for a in node.all_input_nodes):
            hoisted.append(Step(node=node))
            available.add(node)
            continue
        if node.target is operator.getitem and node.args[0] in current:
            current.append(node)
            continue
        if node not in eager and is_lowerable(node):
            if node in splits:
                close()
            current.append(node)
            continue
        close()
        steps.append(Step(node=node))
        available.add(node)
    close()
    return hoisted + steps


def _outputs(graph: fx.Graph, seg: Segment) -> list[fx.Node]:
    members = set(seg.nodes)
    outs = []
    for n in seg.nodes:
        if isinstance(n.meta.get("val"), (tuple, list)):
            continue  # tuple-valued: its getitems are the values
        if any(u not in members for u in n.users):
            outs.append(n)
    return outs


def _param_sources(graph: fx.Graph) -> dict[str, tuple[fx.Node, int | None]]:
    sources: dict[str, tuple[fx.Node, int | None]] = {}
    for n in graph.nodes:
        if n.op != "placeholder":
            continue
        v = n.meta.get("val")
        if isinstance(v, torch.SymInt) and (name := symbol_of(v)) is not None:
            sources.setdefault(name, (n, None))
        elif isinstance(v, torch.Tensor):
            for d, s in enumerate(v.shape):
                if (name := symbol_of(s)) is not None:
                    sources.setdefault(name, (n, d))
    return sources


def graph_hash(gm: fx.GraphModule) -> str:
    """A short, deterministic hash of the graph's code (program names derive from it)."""
    return hashlib.sha256(gm.code.encode()).hexdigest()[:10]


def plan_graph(gm: fx.GraphModule, options: TorchOptions) -> Plan:
    """Cut ``gm`` into segments, lower each into a program (builders, not compiled yet)."""
    graph = gm.graph
    if _sink_input_work(graph):
        gm.recompile()  # the code (and the programs' names, from its hash) follows the new order
    eager: set[fx.Node] = set()
    splits: dict[fx.Node, Decision] = {}
    repeats = find_repeats(graph)
    declined: dict[str, str] = {}
    users = node_users(graph)
    params = _param_sources(graph)
    base = f"fx{graph_hash(gm)}"
    for _ in range(2 * len(graph.nodes) + 1):
        steps = _cut(graph, eager, splits)
        try:
            k = 0
            for step in steps:
                if step.segment is None:
                    continue
                seg = step.segment
                seg.outputs = _outputs(graph, seg)
                lowering = SegmentLowering(f"{base}_k{k}", seg, options, users)
                k += 1
                _lower_segment(lowering)
                cut = _split_point(lowering)
                if cut is not None:
                    raise _Split(cut, *repeated_cuts(repeats, lowering, cut, MAX_STATEMENTS))
                missing = sorted(set(lowering.params) - set(params))
                if missing:
                    raise LoweringError(f"dynamic size(s) {', '.join(missing)} are not carried by any input")
            break
        except _Split as sp:
            splits[sp.node] = sp.record
            for image, record in sp.images.items():  # repeated blocks are cut alike: they share kernels
                splits.setdefault(image, record)
        except _NodeFailure as exc:
            eager.add(exc.node)
            declined[exc.node.name] = str(exc.cause)
            log.debug("%s (%s) runs in eager: %s", exc.node.name, op_name(exc.node), exc.cause)
    else:  # pragma: no cover - each round moves one node to eager
        raise LoweringError("planning did not converge")
    _record_cuts(steps, splits)
    fallback = [s.node for s in steps if s.node is not None and not _is_host(s.node)]
    return Plan(steps, fallback, params, declined)


def _record_cuts(steps: list[Step], cuts: dict[fx.Node, Decision]) -> None:
    """File the cut that starts each segment first among its decisions (``explain()`` lists them)."""
    for step in steps:
        if step.segment is not None and step.segment.nodes[0] in cuts:
            step.segment.decisions.insert(0, cuts[step.segment.nodes[0]])


def _sink_input_work(graph: fx.Graph) -> bool:
    """Move each elementwise or view node that reads only the graph's inputs (a weight's dequantization, a
    transposed weight), and each view node whatever it reads, to just before its first user, so that it
    lands in its consumer's program and is computed where it is read there, instead of being stored by the
    program of wherever the graph listed it (exporters list such nodes first).  A view left in its
    producer's program past a cut is an output of that program that torch makes (an ``expand``: strides
    of zero), which the next program then copies at every call and which keeps it out of the graph's
    launch (BERT's token types, read by its second program).  Returns whether a node moved."""
    order = {n: k for k, n in enumerate(graph.nodes)}
    moved = False
    for node in reversed(list(graph.nodes)):
        inputs, info = node.all_input_nodes, HANDLERS.get(op_name(node))
        if (node.op != "call_function" or not inputs or not node.users or info is None or not is_lowerable(node)
                or info.kind not in ("pointwise", "view")
                or (info.kind != "view" and any(a.op not in ("placeholder", "get_attr") for a in inputs))):
            continue
        first = min(node.users, key=lambda u: order[u])
        if first.op != "output" and order[first] > order[node] + 1:
            first.prepend(node)
            moved = True
    graph.lint()
    return moved


class _Split(Exception):
    def __init__(self, node: fx.Node, record: Decision, images: dict[fx.Node, Decision]):
        super().__init__(node.name)
        self.node = node
        self.record = record
        self.images = images


def _split_point(lowering: SegmentLowering) -> fx.Node | None:
    """The node to start a new program at: where a handler asked for one
    (:meth:`.SegmentLowering.start_program_here`), or, when this program has too many statements, its
    middle."""
    nodes = lowering.segment.nodes
    asked = [n for n in nodes[1:] if n in lowering.starts]
    stmts = lowering.statements
    if not asked and len(stmts) <= MAX_STATEMENTS:
        return None
    owner = asked[0] if asked else stmts[len(stmts) // 2][2]
    if owner is None or owner not in nodes:
        return None
    k = nodes.index(owner)
    while k < len(nodes) and nodes[k].target is operator.getitem:
        k += 1
    while 0 < k < len(nodes) and (is_view(nodes[k - 1]) or _widening(nodes[k - 1], set(nodes[k:]))):
        k -= 1  # views go with their consumers: left behind, a view read by the next program is copied out
    return nodes[k] if 0 < k < len(nodes) else None


def _widening(node: fx.Node, after: set[fx.Node]) -> bool:
    """Whether ``node`` is elementwise, read only by nodes in ``after``, and its inputs take fewer bytes than
    its result (a dequantization, a conversion to a wider type): cutting before it stores less, and its
    consumer reads the narrower values (a quantized contraction then reads the integers)."""
    info = HANDLERS.get(op_name(node))
    inputs = [tensor_meta(a) for a in node.all_input_nodes]
    out = tensor_meta(node)
    if info is None or info.kind != "pointwise" or out is None or not node.users or not set(node.users) <= after:
        return False
    size = sum(t.numel() * t.dtype.itemsize for t in inputs if isinstance(t, torch.Tensor))
    return isinstance(out, torch.Tensor) and size < out.numel() * out.dtype.itemsize



class _NodeFailure(Exception):
    def __init__(self, node: fx.Node, cause: Exception):
        super().__init__(str(cause))
        self.node = node
        self.cause = cause


def _lower_segment(lowering: SegmentLowering) -> ProgramBuilder:
    try:
        lowering.lower()
    except (PolytriError, KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        node = getattr(lowering, "current", None) or lowering.segment.nodes[0]
        raise _NodeFailure(node, exc) from exc
    try:
        return lowering.build()
    except PolytriError as exc:
        node = getattr(exc, "node", None) or lowering.segment.nodes[-1]
        raise _NodeFailure(node, exc) from exc


def fallback_ops(plan: Plan) -> list[str]:
    """Distinct ATen op names of the nodes that run in eager, in graph order."""
    seen: list[str] = []
    for n in plan.eager:
        name = op_name(n)
        if name not in seen:
            seen.append(name)
    return seen

