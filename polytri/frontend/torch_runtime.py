"""Running a planned graph: polytri kernels on torch tensors, eager nodes between them."""

from __future__ import annotations

import functools
import logging
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.fx as fx

from ..cpu_codegen.build import builds_in_background
from ..cpu_codegen.kernel import CpuKernel
from ..errors import IndexValueError, PolytriError
from ..fusion.traffic import Traffic
from ..ir.builder import ProgramBuilder
from ..pipeline.decisions import Decision
from ..runtime.index_check import IndexCheck, IndexRange
from .torch_cache import compile_cached
from .torch_graph_launch import CALL, GraphLaunch, graph_launch
from .torch_launch import Launch, launch_for
from .torch_lower import Segment
from .torch_options import TorchOptions
from .torch_plan import Plan
from .torch_structure import StructureCache, structure
from .torch_traffic import parameter_values, segment_traffic, unfused_bytes

log = logging.getLogger("polytri.torch")

KernelSource = Callable[[ProgramBuilder, str, dict[str, Any]], Any]
"""Where a graph's kernels come from: ``(program, target, options) -> kernel``."""


def _shape_fn(shape: Sequence[str]) -> Callable[[dict[str, int]], tuple[int, ...]]:
    if all(s.isdigit() for s in shape):  # static: nothing to evaluate per call
        dims = tuple(int(s) for s in shape)
        return lambda params: dims
    codes = [compile(s, "<shape>", "eval") for s in shape]
    return lambda params: tuple(int(eval(c, {"__builtins__": {}}, params)) for c in codes)  # noqa: S307


@dataclass
class KernelInfo:
    """A compiled program of a graph, as :func:`polytri.explain` reports it."""

    name: str
    target: str
    source: str
    program: str
    """The program's canonical text."""
    nodes: list[str]
    """FX nodes lowered into it."""
    traffic: Traffic | None = None
    """Estimated global memory traffic of the kernel, per array (:mod:`polytri.fusion.traffic`)."""
    unfused_bytes: int | None = None
    """The same nodes' traffic run one kernel per operator (:mod:`.torch_traffic`)."""
    rewrites: list[str] = field(default_factory=list)
    """What the compiler rewrote across statements: producers recomputed, the online softmax; and how the
    lowering computes ops (a convolution's form, an integer contraction)."""
    lowering: list[Decision] = field(default_factory=list)
    """The lowering's decisions as records (stage ``lowering``): the last entries of ``rewrites``."""
    runtime: list[Decision] = field(default_factory=list)
    """How each call runs the kernel (stage ``runtime``): where its index values are checked."""

    @property
    def bytes_moved(self) -> int | None:
        """Estimated bytes the kernel moves to and from global memory."""
        return None if self.traffic is None else self.traffic.bytes


class _KernelStep:
    """One segment: its kernel and how to build its arguments."""

    def __init__(self, seg: Segment, target: str, options: TorchOptions, kernels: StructureCache):
        assert seg.program is not None
        self.segment = seg
        opts = options.compile_options(target)
        self.form = structure(seg.program)
        """The program's structural form: the kernel is compiled from it, shared with identical segments."""
        # intermediates: their contents after the call do not matter
        opts["temporaries"] = self.form.renamed(tuple(seg.temps))
        self.kernel = kernels(self.form, target, opts) if seg.program.statements else None
        if isinstance(self.kernel, CpuKernel):  # as many threads as PyTorch's own ops use, at most
            self.kernel.thread_limit = torch.get_num_threads
        if options.debug:
            log.warning("program:\n%s\nkernel source:\n%s", seg.program, getattr(self.kernel, "source", ""))
        self.inputs = [(seg.arrays[n], n) for n in seg.inputs]
        self.input_names = [name for name, _ in self.inputs]
        self.input_nodes = [node for _, node in self.inputs]
        self._input_at = {name: k for k, name in enumerate(self.input_names)}
        self._arrays = [a.name for a in seg.program.arrays]
        """The kernel's arrays in the order it takes their addresses."""
        self.outputs = [(seg.arrays[n], n, _shape_fn(seg.shapes[seg.arrays[n]][0]), seg.shapes[seg.arrays[n]][1],
                         len(seg.shapes[seg.arrays[n]][0])) for n in seg.outputs if n not in seg.views]
        self.temps = [(name, _shape_fn(shape), dtype) for name, (shape, dtype) in seg.temps.items()]
        self.bases = [(name, _shape_fn(shape), dtype, len(shape)) for name, (shape, dtype) in seg.bases.items()]
        self.views = list(seg.views.items())
        self.params = list(seg.program.params)
        self._temps: dict[tuple[str, tuple[int, ...]], torch.Tensor] = {}
        self._lock = threading.Lock()
        self._checked: set[tuple[Any, ...]] = set()
        """Argument signatures (shapes, types, parameters) that passed the kernel's checks."""
        self._index_checks: dict[tuple[int, ...], IndexCheck] = {}
        """The indirect subscripts' checks by parameter values."""
        self._indirect = self.kernel is not None and self.kernel.program.reads_indirectly
        self._unchecked = (getattr(self.kernel, "call_unchecked", None)
                           if seg.program.statements and not seg.program.scalars else None)
        self._launches: dict[tuple[int, ...], Launch] = {}
        """The step's launches by parameter values (:mod:`.torch_launch`), made after a checked call."""
        self._launchable = self._unchecked is not None and not self._writes_an_input()
        """Whether the step can have launches; one with indirect subscripts loses it where its index check is
        not ranges of index values (:meth:`_make_launch`)."""
        self._last_made: tuple[object, dict[str, int]] | None = None
        """The call (:data:`.torch_graph_launch.CALL`'s value in its values) in which the step last ran on its
        own intermediates, and the addresses of the arrays it made then, by name (:mod:`.torch_graph_launch`)."""

    def key(self, params: dict[str, int]) -> tuple[int, ...]:
        """The values of the step's own parameters among the graph's ``params``: its launches' key."""
        return tuple(params[p] for p in self.params)

    def _writes_an_input(self) -> bool:
        """Whether the kernel writes one of the arrays it reads from outside (then it gets no launch)."""
        assert self.kernel is not None
        written = {st.target.array for st in self.kernel.program.statements}
        return any(self.form.names.get(name, name) in written for name in self.input_names)

    def _call(self, inputs: list[torch.Tensor], ptrs: list[int], kwargs: dict[str, Any]) -> None:
        """Call the kernel on ``kwargs`` (``inputs``: the input tensors, contiguous and distinct, see _run,
        whose addresses are ``ptrs``); the arguments go through its checks once per signature (the
        inputs' shapes and types, the parameters), later calls with the same signature skip them (they
        cost ~0.1 ms a call) and pass the addresses."""
        assert self.kernel is not None and self.segment.program is not None
        prog = self.segment.program
        if self._unchecked is None:
            self.kernel(**self._detached(inputs, kwargs))
            return
        params = [kwargs[p] for p in prog.params]
        # the other arrays (outputs, intermediates) are made here, from the parameters' values
        signature = (tuple((t.shape, t.dtype, t.device, t.layout, t.is_neg()) for t in inputs), tuple(params))
        if signature in self._checked:
            if self._indirect:  # index values change from call to call: checked every time
                self._check_index_values(inputs, kwargs, tuple(params))
            self._unchecked([kwargs[n].data_ptr() if n in kwargs else ptrs[self._input_at[n]] for n in self._arrays],
                            params)
            return
        self.kernel(**self._detached(inputs, kwargs))
        if len(self._checked) >= 64:  # many sizes (dynamic shapes)
            self._checked.clear()
        self._checked.add(signature)

    def _check_index_values(self, inputs: list[torch.Tensor], kwargs: dict[str, Any],
                            params: tuple[int, ...]) -> None:
        """The call-time check of the kernel's indirect subscripts (:mod:`polytri.runtime.index_check`),
        whose instances are computed once per parameter values."""
        assert self.kernel is not None
        args = self._detached(inputs, kwargs)
        self.index_check(params)({a.name: args[a.name] for a in self.kernel.program.arrays}, {})

    def index_check(self, params: tuple[int, ...]) -> IndexCheck:
        """The kernel's index check at parameter values ``params`` (in the program's order), built once for
        them: the call-time check, the ranges of the step's launches and ``explain()``'s record share it."""
        assert self.kernel is not None
        check = self._index_checks.get(params)
        if check is None:
            if len(self._index_checks) >= 64:  # many sizes (dynamic shapes)
                self._index_checks.clear()
            prog = self.kernel.program
            check = self._index_checks[params] = IndexCheck(prog, dict(zip(prog.params, params)))
        return check

    def _detached(self, inputs: list[torch.Tensor], kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` with the inputs, detached from autograd (the checked call reads them), named as in
        the structural form the kernel was compiled from."""
        args = {**{name: t.detach() for name, t in zip(self.input_names, inputs)}, **kwargs}
        return {self.form.names.get(name, name): v for name, v in args.items()}

    def run(self, env: dict[fx.Node, Any], params: dict[str, int]) -> None:
        """Run the kernel on the values of ``env``; intermediates are reused across calls (a concurrent call
        allocates its own)."""
        if self._lock.acquire(blocking=False):
            try:
                self._run(env, params, self._temps)
            finally:
                self._lock.release()
        else:
            self._run(env, params, {})

    def _run(self, env: dict[fx.Node, Any], params: dict[str, int],
             temps: dict[tuple[str, tuple[int, ...]], torch.Tensor]) -> None:
        """Run the step's launch for these parameter values if it has one (the step's own ``temps`` only),
        else build the kernel's arguments (parameters, inputs, outputs, intermediates from ``temps``), call
        it, and make the launch; bind its results (and the views torch makes of them) in ``env``."""
        key = self.key(params)
        own = temps is self._temps
        launch = self._launches.get(key) if own else None
        made = launch(env) if launch is not None else None
        if made is None:
            kwargs: dict[str, Any] = {p: params[p] for p in self.params}
            inputs, ptrs = self._input_args(env)
            # new arrays on the inputs' device (a kernel without inputs: the graph's, from its other values)
            device = inputs[0].device if inputs else next(
                (v.device for v in env.values() if isinstance(v, torch.Tensor)), torch.device("cpu"))
            made = self._output_args(params, kwargs, device)
            self._temp_args(params, temps, kwargs, device)
            if self.kernel is not None:
                self._call(inputs, ptrs, kwargs)
            if own and self._launchable and _as_given(env, self.input_nodes, ptrs):
                self._make_launch(key, kwargs, made, device)
        if own:
            self._last_made = (env.get(CALL), {name: t.data_ptr() for name, t in made.items()})
        self._bind(made, env)

    def _make_launch(self, key: tuple[int, ...], kwargs: dict[str, Any], made: dict[str, torch.Tensor],
                     device: torch.device) -> None:
        """Keep the launch of the call that just passed (arguments ``kwargs``, new arrays ``made``)."""
        assert self._unchecked is not None and self.kernel is not None
        ranges: tuple[IndexRange, ...] = ()
        if self._indirect:  # its index check as ranges checked in C, on the step's array names
            found = self.index_check(key).ranges()
            if found is None:
                self._launchable = False
                return
            ranges = tuple(replace(r, array=self.form.original_array(r.array)) for r in found)
        if len(self._launches) >= 64:  # many sizes (dynamic shapes)
            self._launches.clear()
        new = [(name, tuple(made[name].shape), dtype, rank) for name, _, _, dtype, rank in self.outputs]
        new += [(name, tuple(made[name].shape), dtype, rank) for name, _, dtype, rank in self.bases]
        self._launches[key] = launch_for(self._unchecked, self._arrays, self.inputs, new,
                                         {name: kwargs[name] for name, _, _ in self.temps}, key, device,
                                         ranges, self.kernel.options["cc"])

    def _bind(self, made: dict[str, torch.Tensor], env: dict[fx.Node, Any]) -> None:
        """Bind the new arrays ``made`` (and the views torch makes of them) in ``env``."""
        for name, node, *_ in self.outputs:
            env[node] = made[name]
        for node, (base, chain) in self.views:
            env[node] = _apply_views(made[base], chain, env)

    def _input_args(self, env: dict[fx.Node, Any]) -> tuple[list[torch.Tensor], list[int]]:
        """The inputs' arrays: contiguous tensors, none overlapping another (copies where needed), and
        their addresses.  A Python number among them goes to the tensors' device."""
        values = [env[node] for node in self.input_nodes]
        device = next((v.device for v in values if isinstance(v, torch.Tensor)), None)
        tensors: list[torch.Tensor] = []
        for t in values:
            if not isinstance(t, torch.Tensor):
                t = torch.as_tensor(t, device=device)
            if t.dim() == 0:
                t = t.reshape(1)
            tensors.append(t if t.is_contiguous() else t.contiguous())
        ptrs = [t.data_ptr() for t in tensors]
        copies = _overlapping(tensors, ptrs)
        for k in copies:
            tensors[k] = tensors[k].clone()
            ptrs[k] = tensors[k].data_ptr()
        return tensors, ptrs

    def _output_args(self, params: dict[str, int], kwargs: dict[str, Any],
                     device: torch.device) -> dict[str, torch.Tensor]:
        """New arrays on ``device`` for the outputs and for the bases of output views; returns the tensors
        (0-d for an output of rank 0) by array name."""
        made: dict[str, torch.Tensor] = {}
        for name, _, shape, dtype, rank in self.outputs:
            t = torch.empty(shape(params) if rank else (1,), dtype=dtype, device=device)
            kwargs[name] = t
            made[name] = t if rank else t.reshape(())
        for name, shape, dtype, rank in self.bases:
            t = torch.empty(shape(params) if rank else (1,), dtype=dtype, device=device)
            kwargs[name] = t
            made[name] = t if rank else t.reshape(())
        return made

    def _temp_args(self, params: dict[str, int], temps: dict[tuple[str, tuple[int, ...]], torch.Tensor],
                   kwargs: dict[str, Any], device: torch.device) -> None:
        """The intermediates' arrays on ``device``, reused from ``temps`` (by name and size) where they
        were made before."""
        for name, shape, dtype in self.temps:
            dims = shape(params) or (1,)
            t = temps.get((name, dims))
            if t is None or t.device != device:
                if len(temps) > 4 * len(self.temps):  # many sizes (dynamic shapes): keep the latest only
                    temps.clear()
                t = temps[(name, dims)] = torch.empty(dims, dtype=dtype, device=device)
            kwargs[name] = t


def index_check_decision(step: _KernelStep, values: dict[str, int]) -> Decision:
    """Where each call checks the index values of ``step`` (a kernel with indirect subscripts) at the graph's
    parameter ``values``: in compiled code before the kernel runs (a CPU kernel with launches whose check is
    ranges of index values, see :meth:`.IndexCheck.ranges`), or in Python."""
    name = step.segment.program.name if step.segment.program else "program"
    found = step.index_check(step.key(values)).ranges() if step._launchable else None
    if found is None:
        if step._unchecked is None:
            why = "the kernel is called through its checked entry on this target"
        elif step._writes_an_input():
            why = "the kernel writes one of its inputs"
        else:
            why = "a subscript computes on them"
        outside = ", so the kernel runs outside the graph's one C call" if step._unchecked is not None else ""
        return Decision("runtime", "index-check", name,
                        f"index values: computed from the index arrays and checked in Python at each call ({why})"
                        + outside, {"compiled": False, "why": why})
    spans = [(step.form.original_array(r.array), r.start, r.start + r.count, r.low, r.high) for r in found]
    listed = ", ".join(f"{a} elements [{lo}, {hi}) in [{low}, {high})" for a, lo, hi, low, high in spans)
    return Decision("runtime", "index-check", name,
                    f"index values: checked by compiled code just before the kernel runs ({listed or 'none read'}), "
                    "from its launch on (made after a first call with these sizes that read its inputs in place; "
                    "until then, in Python)", {"compiled": True, "ranges": spans})


def _as_given(env: dict[fx.Node, Any], nodes: Sequence[fx.Node], ptrs: Sequence[int]) -> bool:
    """Whether the kernel read each of ``nodes`` in place (at ``ptrs``): a tensor, not a copy."""
    values = [env[n] for n in nodes]
    return all(isinstance(v, torch.Tensor) and v.is_contiguous() and v.data_ptr() == p for v, p in zip(values, ptrs))


def _apply_views(t: torch.Tensor, chain: list[fx.Node], env: dict[fx.Node, Any]) -> torch.Tensor:
    """``t`` through the view nodes of ``chain`` (run by torch: their other arguments from ``env``)."""
    for n in chain:
        args = fx.node.map_arg(n.args[1:], lambda a: env[a])
        kw = fx.node.map_arg(n.kwargs, lambda a: env[a])
        t = _function(n)(t, *args, **kw)
    return t


def _function(node: fx.Node) -> Callable[..., Any]:
    """The function a ``call_function`` node calls."""
    fn = node.target
    if not callable(fn):
        raise TypeError(f"node {node.name} calls no function: {fn!r}")
    return fn


def _overlapping(tensors: list[torch.Tensor], ptrs: list[int]) -> list[int]:
    """Positions of tensors to copy so that the memory of no two others overlaps (``ptrs``: their
    addresses): a sweep over the tensors by address, not a comparison of every pair (a kernel of a CNN
    takes dozens of weights; under cProfile, MobileNet's argument preparation took 82 ms over 50 calls with
    the pairs, 37 ms with the sweep)."""
    spans = sorted((p, p + n, k) for k, (t, p) in enumerate(zip(tensors, ptrs)) if (n := t.nbytes))
    copies, end = [], -1
    for start, stop, k in spans:
        if start < end:
            copies.append(k)
        else:
            end = stop
    return copies


class CompiledGraph:
    """The callable a backend returns for one FX graph."""

    def __init__(self, gm: fx.GraphModule, plan: Plan, target: str, options: TorchOptions,
                 kernels: KernelSource | None = None):
        """``kernels`` makes each segment's kernel from its program, target and options (default:
        :func:`.torch_cache.compile_cached`, which compiles or reuses the disk cache's)."""
        if kernels is None:
            kernels = functools.partial(compile_cached, use_disk=options.cache)
        shared = StructureCache(kernels)  # a model's repeated blocks compile once
        self.gm = gm
        self.plan = plan
        self.target = target
        self.options = options
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.attrs = {n: _fetch_attr(gm, str(n.target)) for n in gm.graph.nodes if n.op == "get_attr"}
        self.output = next(n for n in gm.graph.nodes if n.op == "output")
        self.steps: list[_KernelStep | fx.Node] = []
        with builds_in_background():  # the C compiler builds one kernel while the next is scheduled
            for step in plan.steps:
                if step.segment is not None:
                    self.steps.append(_KernelStep(step.segment, target, options, shared))
                else:
                    assert step.node is not None
                    self.steps.append(step.node)
        for s in self.steps:  # a failed build raises here, as it did where the kernel was compiled
            if isinstance(s, _KernelStep) and isinstance(s.kernel, CpuKernel):
                s.kernel.wait_built()
        self._failed = False
        self._plans: dict[tuple[int, ...], list[GraphLaunch | _KernelStep | fx.Node]] = {}
        """What a call runs, by parameter values: steps, and runs of them as one launch (:meth:`_make_plan`)."""

    @property
    def kernels(self) -> list[KernelInfo]:
        out = []
        for s in self.steps:
            if isinstance(s, _KernelStep):
                prog = s.segment.program
                assert prog is not None
                try:
                    traffic = segment_traffic(s.segment, s.kernel, parameter_values(self.plan.params),
                                              s.form.renamed(tuple(s.segment.temps)))
                    unfused = unfused_bytes(s.segment.nodes)
                except Exception as exc:  # an estimate for the report: its failure must not fail the report
                    log.warning("%s: no memory traffic estimate (%s: %s)", prog.name, type(exc).__name__, exc)
                    traffic, unfused = None, None
                if traffic is not None:  # named as the segment names its arrays
                    traffic = Traffic(tuple(replace(a, array=s.form.original_array(a.array)) for a in traffic.arrays))
                rewrites = [s.form.original_text(d.text.removeprefix("fusion: "))
                            for d in getattr(s.kernel, "decision_records", ()) if d.kind in ("recompute", "online-softmax")]
                rewrites += [d.text for d in s.segment.decisions]
                source = s.form.original_text(getattr(s.kernel, "source", ""))
                runtime: list[Decision] = []
                if s._indirect:
                    try:
                        runtime.append(index_check_decision(s, parameter_values(self.plan.params)))
                    except Exception as exc:  # a line of the report: its failure must not fail the report
                        log.warning("%s: no index-check record (%s: %s)", prog.name, type(exc).__name__, exc)
                out.append(KernelInfo(prog.name, self.target, source, str(prog), [n.name for n in s.segment.nodes],
                                      traffic, unfused, rewrites, list(s.segment.decisions), runtime))
        return out

    def __call__(self, *args: Any) -> Any:
        if self._failed:
            return self.gm.forward(*args)
        try:
            return self._run(args)
        except IndexValueError:  # the data's fault, not the graph's: eager raises its own error for this call
            return self.gm.forward(*args)
        except PolytriError as exc:
            self._failed = True
            warnings.warn(f"polytri: a compiled graph failed at run time ({exc}); it runs in eager from now on",
                          stacklevel=2)
            log.warning("graph runs in eager after a run-time failure: %s", exc)
            return self.gm.forward(*args)

    def _run(self, args: Sequence[Any]) -> Any:
        env: dict[Any, Any] = dict(zip(self.placeholders, args))
        env.update(self.attrs)
        env[CALL] = object()  # this call, as the steps' records of their arrays name it
        params: dict[str, int] = {}
        for name, (node, dim) in self.plan.params.items():
            v = env[node]
            params[name] = int(v) if dim is None else int(v.shape[dim])
        key = tuple(params.values())
        plan = self._plans.get(key)
        for unit in self.steps if plan is None else plan:
            if isinstance(unit, GraphLaunch):
                if not unit(env):
                    for step in unit.steps:
                        step.run(env, params)
            elif isinstance(unit, _KernelStep):
                unit.run(env, params)
            else:
                a = fx.node.map_arg(unit.args, lambda n: env[n])
                kw = fx.node.map_arg(unit.kwargs, lambda n: env[n])
                env[unit] = _function(unit)(*a, **kw)
        if plan is None:
            self._make_plan(key, env, params)
        return fx.node.map_arg(self.output.args[0], lambda n: env[n])

    def _make_plan(self, key: tuple[int, ...], env: dict[fx.Node, Any], params: dict[str, int]) -> None:
        """After a call with parameter values ``key``, the units that later calls with them run: each run of
        consecutive kernel steps with launches as one launch (:mod:`.torch_graph_launch`), the other steps
        as they are; none while a step that can have a launch lacks it (its first call copied an input:
        the next call tries again)."""
        units: list[GraphLaunch | _KernelStep | fx.Node] = []
        run: list[_KernelStep] = []

        def close() -> None:
            whole = graph_launch(run, [s.key(params) for s in run], env) if len(run) > 1 else None
            units.extend([whole] if whole is not None else run)
            run.clear()
        for step in self.steps:
            if isinstance(step, _KernelStep) and step._launchable and self.target == "cpu":
                if step.key(params) not in step._launches:
                    return
                run.append(step)
                continue
            close()
            units.append(step)
        close()
        if len(self._plans) >= 16:  # many sizes (dynamic shapes)
            self._plans.clear()
        self._plans[key] = units


def _fetch_attr(gm: fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj
