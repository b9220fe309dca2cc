"""ATen FX graphs -> polytri programs.

The nodes of a graph are taken in order; each maximal run of nodes that polytri lowers becomes one
``pt.Program`` (one array per input, output and stored intermediate; one or more statements per node);
nodes it does not lower run in eager between the programs.  Within a program, views compose their index
maps and single-use elementwise results are computed inside their consumer (no array, no statement):
the groups of nodes so merged are reported as *fusion groups*.
"""

from __future__ import annotations

import logging
import operator
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from ..errors import PolytriError
from ..ir.builder import ProgramBuilder
from ..pipeline.decisions import Decision
from .torch_args import as_int, node_arg
from .torch_options import TorchOptions, default_target
from .torch_symbolic import size_text
from .torch_values import Index, LoweringError, Val, array_val, cast, pt_dtype

log = logging.getLogger("polytri.torch")

#: Expressions larger than this many operations are stored instead of being inlined further.
MAX_INLINE_OPS = 48

Handler = Callable[["SegmentLowering", fx.Node], Any]
#: The right-hand side of a statement: its text from the iterators of the output and of the reduction.
Rhs = Callable[[Index, Index], str]


def converted(v: Val, dtype: torch.dtype) -> Rhs:
    """A statement's right-hand side: ``v`` at the output's iterators, converted to ``dtype``."""
    return lambda idx, red: cast(v.load(idx), v.dtype, dtype)


@dataclass(frozen=True)
class OpInfo:
    """How a node kind is lowered."""

    handler: Handler
    kind: str
    """``view`` (index map only), ``pointwise``, ``reduce`` (reads each input element a few times) or
    ``reuse`` (reads input elements many times: lazy inputs are stored first)."""


HANDLERS: dict[str, OpInfo] = {}


def register(*names: str, kind: str) -> Callable[[Handler], Handler]:
    """Register a handler for ATen overloads named like ``aten.add.Tensor``."""
    def deco(fn: Handler) -> Handler:
        for n in names:
            HANDLERS[n] = OpInfo(fn, kind)
        return fn
    return deco


def op_name(node: fx.Node) -> str:
    """``aten.add.Tensor`` for an ATen node, the function's name otherwise."""
    t = node.target
    if isinstance(t, torch._ops.OpOverload):
        return str(t)
    return getattr(t, "__name__", str(t))


def describe_value(v: Any) -> Any:
    """A hashable description of a runtime or fake value (cache keys, repeated blocks)."""
    if isinstance(v, torch.Tensor):
        return ("T", tuple(str(s) for s in v.shape), str(v.dtype), tuple(str(s) for s in v.stride()), v.device.type)
    if isinstance(v, torch.SymInt):
        return ("S", str(v))
    return ("V", repr(v))


def tensor_meta(node: Any) -> torch.Tensor | None:
    """The fake tensor of a node's value (``None`` for non-tensor values)."""
    if not isinstance(node, fx.Node):
        return None
    v = node.meta.get("val")
    return v if isinstance(v, torch.Tensor) else None


def is_view(node: fx.Node) -> bool:
    """Whether ``node`` is an op lowered as an index map only (``view``, ``permute``...)."""
    info = HANDLERS.get(op_name(node))
    return info is not None and info.kind == "view"


def is_lowerable(node: fx.Node) -> bool:
    """Whether ``node`` is a call polytri has a handler for, on supported dtypes."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        src = node.args[0]
        return isinstance(src, fx.Node) and is_lowerable(src)
    if op_name(node) not in HANDLERS:
        return False
    vals = node.meta.get("val")
    outs = vals if isinstance(vals, (tuple, list)) else [vals]
    ins = [tensor_meta(a) for a in node.all_input_nodes]
    for t in [*outs, *ins]:
        if isinstance(t, torch.Tensor) and (t.dtype not in _SUPPORTED or t.device.type not in ("cpu", "cuda")):
            return False
    return all(isinstance(t, torch.Tensor) or t is None for t in outs)


_SUPPORTED = {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32,
              torch.int64, torch.bool}


@dataclass
class Segment:
    """A run of lowered nodes: one program."""

    nodes: list[fx.Node]
    inputs: list[fx.Node] = field(default_factory=list)
    """Tensor values read from outside, in the order their arrays were declared."""
    outputs: list[fx.Node] = field(default_factory=list)
    """Values needed outside (by later steps or the graph's output)."""
    program: ProgramBuilder | None = None
    arrays: dict[fx.Node, str] = field(default_factory=dict)
    """The array of every input and output value."""
    temps: dict[str, tuple[tuple[str, ...], torch.dtype]] = field(default_factory=dict)
    """Stored intermediates: array name -> (shape texts, dtype)."""
    shapes: dict[str, tuple[tuple[str, ...], torch.dtype]] = field(default_factory=dict)
    """Every array: name -> (shape texts, dtype)."""
    groups: list[list[str]] = field(default_factory=list)
    """Nodes computed in one statement (inlined elementwise chains), by FX name."""
    views: dict[fx.Node, tuple[str, list[fx.Node]]] = field(default_factory=dict)
    """Outputs that are views of a stored array: the array and the view nodes torch applies to it."""
    bases: dict[str, tuple[tuple[str, ...], torch.dtype]] = field(default_factory=dict)
    """Arrays that are only seen through such views (allocated at each call, like outputs)."""
    decisions: list[Decision] = field(default_factory=list)
    """What the lowering chose for some nodes (an integer contraction), as ``explain()`` reports it."""


@dataclass(frozen=True)
class _InNest:
    """A statement's builder that runs inside loops it shares with the statements next to it (one nest per
    point of those loops, see :meth:`SegmentLowering.one_nest`): :meth:`SegmentLowering.build` opens the
    shared loops once for a run of members of one nest; alone, a member opens them itself."""

    nest: int
    shared: tuple[tuple[str, str], ...]
    inner: Callable[[ProgramBuilder], None]

    def __call__(self, p: ProgramBuilder) -> None:
        with ExitStack() as stack:
            for var, ext in self.shared:
                stack.enter_context(p.loop(var, 0, ext))
            self.inner(p)


class SegmentLowering:
    """Builds the program of one segment; handlers call its methods."""

    def __init__(self, name: str, segment: Segment, options: TorchOptions, users: dict[fx.Node, list[fx.Node]]):
        self.segment = segment
        self.options = options
        self.users = users
        self.members = set(segment.nodes)
        self.params: set[str] = set()
        self.values: dict[fx.Node, Any] = {}
        self.statements: list[tuple[str, Callable[[ProgramBuilder], None], fx.Node | None]] = []
        self.current: fx.Node | None = None
        self.decls: dict[str, tuple[tuple[str, ...], torch.dtype]] = {}
        self.inlined: dict[fx.Node, list[str]] = {}
        self.chains: dict[fx.Node, tuple[str, list[fx.Node]]] = {}
        self.name = name
        self.starts: set[fx.Node] = set()
        """Nodes whose handler asked to begin a program of their own (:meth:`start_program_here`)."""
        self._nest: tuple[int, tuple[str, ...]] | None = None
        """The nest that :meth:`emit` puts statements in (:meth:`one_nest`): its number and shape."""
        self._nests = 0

    @contextmanager
    def one_nest(self, shape: Sequence[str]) -> Iterator[None]:
        """Statements emitted meanwhile share their first ``len(shape)`` loops, over ``shape``: one nest,
        in which each point runs them all in turn (each statement's own loops inside), where separate
        statements would each be a nest of their own.  For a chain of statements about one element (the
        steps of a reduction in partial results), the input order then keeps the element's partial
        results in the cache from one step to the next, and the scheduler is free to do otherwise."""
        assert self._nest is None, "nests do not nest"
        self._nests += 1
        self._nest = (self._nests, tuple(str(e) for e in shape))
        try:
            yield
        finally:
            self._nest = None

    def start_program_here(self, node: fx.Node) -> None:
        """Ask the planner to begin a new program at ``node``, its inputs stored by the program before: the
        handler's statements schedule badly together with what comes before them."""
        self.starts.add(node)

    # -- values ------------------------------------------------------------------------------------
    def sizes(self, node: Any) -> tuple[str, ...]:
        t = tensor_meta(node)
        if t is None:
            raise LoweringError(f"{node} is not a tensor")
        return tuple(size_text(s, self.params) for s in t.shape)

    def size(self, x: Any) -> str:
        return size_text(x, self.params)

    def out(self, node: fx.Node, i: int | None = None) -> tuple[tuple[str, ...], torch.dtype]:
        """Shape texts and dtype of a node's (``i``-th) result."""
        v = node.meta["val"]
        t = v if i is None else v[i]
        return tuple(size_text(s, self.params) for s in t.shape), t.dtype

    def val(self, arg: Any) -> Val:
        """The value of a tensor argument of the node being lowered."""
        if not isinstance(arg, fx.Node):
            raise LoweringError(f"expected a tensor argument, got {arg!r}")
        if arg in self.values:
            v = self.values[arg]
            if not isinstance(v, Val):
                raise LoweringError(f"{arg.name} is not a single tensor")
            return v
        t = tensor_meta(arg)
        if t is None:
            raise LoweringError(f"argument {arg.name} is not a tensor")
        pt_dtype(t.dtype)
        name = self.declare(f"in_{arg.name}", self.sizes(arg), t.dtype)
        self.segment.inputs.append(arg)
        self.segment.arrays[arg] = name
        v = array_val(name, self.sizes(arg), t.dtype)
        self.values[arg] = v
        return v

    def declare(self, base: str, shape: Sequence[str], dtype: torch.dtype) -> str:
        """Declare an array (a unique, valid name derived from ``base``); returns its name."""
        name = "t_" + "".join(c if c.isalnum() else "_" for c in base)
        k = 1
        while name in self.decls:
            name, k = f"t_{base}_{k}", k + 1
        self.decls[name] = (tuple(shape), dtype)
        return name

    def temp(self, base: str, shape: Sequence[str], dtype: torch.dtype) -> str:
        """Declare an intermediate array (allocated by the runtime at each call)."""
        name = self.declare(base, shape, dtype)
        self.segment.temps[name] = (tuple(shape), dtype)
        return name

    def stored(self, v: Val, base: str) -> Val:
        """``v`` in an array of its own (a copy statement when it is not stored yet)."""
        if v.array is not None:
            return v
        name = self.temp(base, v.shape, v.dtype)
        self.emit(name, v.shape, lambda idx, red: v.load(idx))
        return array_val(name, v.shape, v.dtype)

    def readable(self, v: Val, base: str) -> Val:
        """``v`` if reading it costs nothing (an array or a view of one), else stored."""
        return v if v.ops == 0 else self.stored(v, base)

    # -- statements --------------------------------------------------------------------------------
    def target(self) -> str:
        """The target the segment is compiled for: the explicit one, or the one of the device of the node
        being lowered (as the runtime chooses it)."""
        if self.options.target is not None:
            return self.options.target
        val = self.current.meta.get("val") if self.current is not None else None
        device = getattr(val, "device", None)
        return default_target([device] if device is not None else [])

    def on_gpu(self) -> bool:
        """Whether the segment is compiled for a Triton target."""
        return self.target() != "cpu"

    def emit(self, target: str, shape: Sequence[str], rhs: Rhs,
             op: str = "=", red: Sequence[str] = (), guard: Sequence[str] = (),
             index: Callable[[tuple[str, ...]], tuple[str, ...]] | None = None,
             target_index: Callable[[tuple[str, ...], tuple[str, ...]], tuple[str, ...]] | None = None,
             kept_inside: bool = False) -> None:
        """Add ``target[i...] op rhs(i..., r...)`` over ``shape`` (then the reduction loops ``red``), where
        every affine condition of ``guard`` holds; ``kept_inside``: the loops over ``shape`` that the
        current nest (:meth:`one_nest`) does not share run inside the first reduction loop."""
        if any(str(e).strip() == "0" for e in (*shape, *red)):
            return  # no instances (the scheduler is not handed empty domains)
        iters = tuple(f"i{d}" for d in range(len(shape)))
        reds = tuple(f"r{d}" for d in range(len(red)))
        tidx = target_index(iters, reds) if target_index else index(iters) if index is not None else iters
        text = f"{target}[{', '.join(tidx) if tidx else '0'}] {op} {rhs(iters, reds)}"
        nest = list(zip(iters, shape))
        shared: list[tuple[str, str]] = []
        if self._nest is not None:  # the nest's loops first, in the same order for each of its statements
            k = len(self._nest[1])
            assert tuple(str(e) for e in shape[:k]) == self._nest[1], (shape, self._nest)
            shared, nest = (_outer_first(nest[:k]) if not self.on_gpu() else nest[:k]), nest[k:]
        # the CPU shares the outermost loop among threads; a GPU grid takes every parallel loop
        loops = (_outer_first(nest) if op == "=" and not self.on_gpu() and not shared else nest) + list(zip(reds, red))
        if kept_inside and red:
            loops = loops[len(nest):len(nest) + 1] + nest + loops[len(nest) + 1:]
        single = [var for var, ext in shared + loops if str(ext).strip() == "1"]
        if single:  # a loop of one iteration is its iterator at 0: nests then line up whatever their rank
            at_zero = re.compile(r"\b(" + "|".join(single) + r")\b")
            text, guard = at_zero.sub("0", text), [at_zero.sub("0", g) for g in guard]
            shared = [(var, ext) for var, ext in shared if var not in single]
            loops = [(var, ext) for var, ext in loops if var not in single]
        if not loops and not shared:  # a 0-d value: one iteration (the scheduler wants at least one loop)
            loops = [("i0", "1")]

        def add(p: ProgramBuilder) -> None:
            with ExitStack() as stack:
                for var, ext in loops:
                    stack.enter_context(p.loop(var, 0, ext))
                for cond in guard:
                    stack.enter_context(p.when(cond))
                p.assign(text)
        if self._nest is not None and shared:
            add = _InNest(self._nest[0], tuple(shared), add)
        self.statements.append((text, add, self.current))

    # -- driving -----------------------------------------------------------------------------------
    def lower(self) -> None:
        """Lower every node of the segment, storing the values needed outside it."""
        needed = set(self.segment.outputs)
        for node in self.segment.nodes:
            if node.target is operator.getitem:
                self.values[node] = self.values[node_arg(node.args[0])][as_int(node.args[1])]
            else:
                info = HANDLERS[op_name(node)]
                self.current = node
                self.values[node] = info.handler(self, node)
            res = self.values[node]
            if isinstance(res, Val):
                self.values[node] = self._settle(node, res, node in needed)
                self._track_view(node, res)
        taken: set[str] = set()
        for node in self.segment.outputs:
            v = self.values[node]
            assert isinstance(v, Val)
            if v.array is None and node in self.chains:
                base, chain = self.chains[node]  # a view of a stored array: torch makes it, no copy
                self.segment.views[node] = (base, chain)
                if base in self.segment.temps:
                    self.segment.bases[base] = self.segment.temps.pop(base)
                continue
            if v.array is None or v.array not in self.segment.temps or v.array in taken:
                name = self.declare(f"out_{node.name}", v.shape, v.dtype)
                self.emit(name, v.shape, converted(v, v.dtype))
                v = array_val(name, v.shape, v.dtype)
            assert v.array is not None
            taken.add(v.array)
            self.segment.arrays[node] = v.array
            self.segment.temps.pop(v.array, None)

    def _track_view(self, node: fx.Node, v: Val) -> None:
        """Remember views (chains of view nodes) of arrays stored by this program."""
        if v.array is not None or v.ops or not is_view(node) or not node.args:
            return
        src = node.args[0]
        if not isinstance(src, fx.Node) or src not in self.values:
            return
        sv = self.values[src]
        if isinstance(sv, Val) and sv.array is not None and (sv.array in self.segment.temps
                                                             or sv.array in self.segment.bases):
            self.chains[node] = (sv.array, [node])
        elif src in self.chains:
            base, chain = self.chains[src]
            self.chains[node] = (base, [*chain, node])

    def _settle(self, node: fx.Node, v: Val, needed: bool) -> Val:
        """Store ``v`` unless it can be computed where it is read."""
        users = self.users.get(node, [])
        if v.ops > 0 and not needed and self.options.inline and len(users) == 1 and users[0] in self.members \
                and users[0].target is not operator.getitem \
                and (HANDLERS[op_name(users[0])].kind in ("pointwise", "view", "reduce") and v.ops <= MAX_INLINE_OPS
                     or HANDLERS[op_name(users[0])].kind == "reuse"):
            self.inlined.setdefault(users[0], []).extend(self.inlined.pop(node, []) + [node.name])
            return v
        group = self.inlined.pop(node, [])
        if group:
            self.segment.groups.append(group + [node.name])
        if v.ops == 0:
            return v
        return self.stored(v, node.name)

    def build(self) -> ProgramBuilder:
        """The program: arrays (inputs, outputs, intermediates) and statements."""
        p = ProgramBuilder(self.name, params=sorted(self.params))
        for name, (shape, dtype) in self.decls.items():
            p.array(name, shape if shape else ("1",), pt_dtype(dtype))
        with ExitStack() as nest:
            open_nest: int | None = None
            for _, add, node in self.statements:
                if not isinstance(add, _InNest) or add.nest != open_nest:  # leave the nest, enter the next
                    nest.close()
                    open_nest = None
                    if isinstance(add, _InNest):
                        for var, ext in add.shared:
                            nest.enter_context(p.loop(var, 0, ext))
                        open_nest = add.nest
                try:
                    (add.inner if isinstance(add, _InNest) else add)(p)
                except PolytriError as exc:
                    exc.node = node  # type: ignore[attr-defined]  # PolytriError declares no `node` (polytri/errors.py)
                    raise
        self.segment.shapes = dict(self.decls)
        self.segment.program = p
        return p


#: Leading loops with at most this many iterations are moved inward (after the first longer loop), so
#: that the outermost loop, the one OpenMP shares among threads, has work for every thread.
SHORT_LOOP = 4


def _outer_first(loops: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``loops`` with short leading constant loops (a batch of 3 images) moved inside the first long one."""
    k = 0
    while k < len(loops) and loops[k][1].isdigit() and int(loops[k][1]) <= SHORT_LOOP:
        k += 1
    if k == 0 or k == len(loops):
        return loops
    return [loops[k]] + loops[:k] + loops[k + 1:]


def node_users(graph: fx.Graph) -> dict[fx.Node, list[fx.Node]]:
    """The users of every node, following getitem to the tuple's consumers."""
    return {n: list(n.users) for n in graph.nodes}
