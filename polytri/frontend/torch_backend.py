"""The ``polytri`` backend of ``torch.compile``.

Dynamo hands over an FX graph; ``aot_autograd`` lowers it to ATen with the core decompositions (except
the ops polytri lowers better whole); the ATen graph is planned into polytri programs and eager nodes,
compiled, and run.  Any failure while compiling a graph falls back to eager for that graph, with a
warning: results are always those of eager.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
import torch.fx as fx

from ..errors import OptionError, PolytriError
from .torch_lower import describe_value
from .torch_options import TorchOptions, check_options, default_target
from .torch_plan import fallback_ops, graph_hash, plan_graph
from .torch_product_factors import move_product_factors
from .torch_runtime import CompiledGraph, KernelInfo

log = logging.getLogger("polytri.torch")

#: ATen ops kept whole (not decomposed): polytri lowers them better than their decompositions.
KEEP_WHOLE = ("addmm", "softmax", "log_softmax", "layer_norm", "convolution", "conv2d", "_convolution")

_GRAPH_CACHE: dict[Any, CompiledGraph] = {}
_LOGGED_FALLBACKS: set[str] = set()
_RECORDERS: list[list[GraphReport]] = []
_LOCK = threading.Lock()


class GraphReport:
    """What happened to one ATen graph (collected by :func:`polytri.explain`)."""

    def __init__(self, kernels: list[KernelInfo] | Callable[[], list[KernelInfo]], fallback_ops: list[str],
                 fusion_groups: list[list[str]], error: str | None = None, declined: dict[str, str] | None = None):
        self._kernels = kernels
        self.fallback_ops = fallback_ops
        self.fusion_groups = fusion_groups
        self.error = error
        """Why the whole graph runs in eager (``None`` when it was compiled)."""
        self.declined = dict(declined or {})

    @property
    def kernels(self) -> list[KernelInfo]:
        """The graph's kernels (their memory traffic is estimated when first asked for)."""
        if callable(self._kernels):
            self._kernels = self._kernels()
        return self._kernels


@contextlib.contextmanager
def recording(records: list[GraphReport]) -> Iterator[list[GraphReport]]:
    """Append the report of every graph compiled (or taken from the cache) meanwhile to ``records``."""
    with _LOCK:
        _RECORDERS.append(records)
    try:
        yield records
    finally:
        with _LOCK:
            _RECORDERS.remove(records)


def _kept_whole(op: Any) -> bool:
    """Whether an ATen overload is one of :data:`KEEP_WHOLE` (whatever its overload)."""
    return op.name().split("::")[-1].split(".")[0] in KEEP_WHOLE


def _attention_in_math_form(example_inputs: Sequence[Any]) -> contextlib.AbstractContextManager[Any]:
    """While a graph of CUDA tensors is traced to ATen: ``scaled_dot_product_attention`` in its math form
    (products and a softmax, which polytri lowers) instead of CUDA's fused attention ops, which no core
    decomposition takes apart and which would be left to eager.  On the CPU torch decomposes its own fused
    op, and the trace is left as it is."""
    if any(isinstance(x, torch.Tensor) and x.device.type == "cuda" for x in example_inputs):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return sdpa_kernel([SDPBackend.MATH])
    return contextlib.nullcontext()


def decompositions() -> dict[Any, Callable[..., Any]]:
    """Core ATen decompositions minus :data:`KEEP_WHOLE` (``pt.jit``'s, through ``aot_autograd``)."""
    from torch._decomp import core_aten_decompositions
    table = core_aten_decompositions()
    return {op: fn for op, fn in table.items() if not _kept_whole(op)}


def export_decompositions() -> Any:
    """``torch.export``'s default decompositions less :data:`KEEP_WHOLE`, for ``pt.export``: the same
    ATen graph as ``pt.jit``'s.  Composite ops (``conv2d``, ``layer_norm``) still decompose, as they do in
    ``aot_autograd`` whatever the table."""
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        composite = torch._C._dispatch_has_kernel_for_dispatch_key(op.name(),
                                                                   torch._C.DispatchKey.CompositeImplicitAutograd)
        if _kept_whole(op) and not composite:
            del table[op]
    return table


def _record(report: GraphReport) -> None:
    with _LOCK:
        for rec in _RECORDERS:
            rec.append(report)


def compile_graph(gm: fx.GraphModule, example_inputs: Sequence[Any], options: TorchOptions) -> Callable[..., Any]:
    """Compile an ATen graph; returns ``gm.forward`` (eager) with a warning when anything fails."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():  # aot_autograd calls compilers inside its fake mode
        return _compile_graph(gm, example_inputs, options)


def _compile_graph(gm: fx.GraphModule, example_inputs: Sequence[Any], options: TorchOptions) -> Callable[..., Any]:
    devices = [x.device for x in example_inputs if isinstance(x, torch.Tensor)]
    target = options.target or default_target(devices)
    consts = tuple(describe_value(getattr(gm, n.target)) + (_digest(getattr(gm, n.target)),)
                   for n in gm.graph.nodes if n.op == "get_attr" and isinstance(getattr(gm, n.target), torch.Tensor))
    key = (gm.code, consts, tuple(describe_value(x) for x in example_inputs), target, options.key())
    if options.cache and key in _GRAPH_CACHE:
        compiled = _GRAPH_CACHE[key]  # same code and constants: its own graph module is equivalent
        _report(compiled)
        return compiled
    try:
        if target == "cpu" and move_product_factors(gm.graph):
            gm.recompile()
        plan = plan_graph(gm, options)
        compiled = CompiledGraph(gm, plan, target, options)
    except (PolytriError, Exception) as exc:  # noqa: BLE001 - any failure: eager, never a crash
        if isinstance(exc, OptionError) or os.environ.get("POLYTRI_DEBUG", "") not in ("", "0"):
            raise
        warnings.warn(f"polytri: graph {graph_hash(gm)} runs in eager: {type(exc).__name__}: {exc}", stacklevel=2)
        log.warning("graph %s runs in eager: %s: %s", graph_hash(gm), type(exc).__name__, exc)
        ops = sorted({str(n.target) for n in gm.graph.nodes if n.op == "call_function"})
        _record(GraphReport([], ops, [], error=f"{type(exc).__name__}: {exc}"))
        return gm.forward
    if options.cache:
        _GRAPH_CACHE[key] = compiled
    _report(compiled)
    return compiled


def _digest(t: torch.Tensor) -> str:
    import hashlib
    data = t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return hashlib.sha256(data).hexdigest()


def _report(compiled: CompiledGraph) -> None:
    ops = fallback_ops(compiled.plan)
    for op in ops:
        if op not in _LOGGED_FALLBACKS:
            _LOGGED_FALLBACKS.add(op)
            log.info("%s is not lowered by polytri; it runs in eager between polytri kernels", op)
    with _LOCK:
        if not _RECORDERS:  # no pt.explain running: the report (and its traffic estimates) is not built
            return
    groups = [g for s in compiled.plan.segments for g in s.groups]
    _record(GraphReport(lambda: compiled.kernels, ops, groups, declined=compiled.plan.declined))


class PolytriBackend:
    """A ``torch.compile`` backend object (created once per option set, so Dynamo does not recompile; or
    once per ``pt.jit`` function, which keeps the reports of the graphs it compiled for ``pt.explain``)."""

    def __init__(self, options: Mapping[str, Any] | None = None, *, keep_reports: bool = False):
        self.options = check_options(options)
        self.reports: list[GraphReport] | None = [] if keep_reports else None
        """The reports of the graphs compiled so far (when kept)."""

    def __call__(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        if self.reports is None:
            return self._compile(gm, example_inputs)
        with recording(self.reports):
            return self._compile(gm, example_inputs)

    def _compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        from torch._functorch.aot_autograd import aot_module_simplified

        try:
            with _attention_in_math_form(example_inputs):
                return aot_module_simplified(gm, example_inputs, fw_compiler=self._compile_forward,
                                             decompositions=decompositions())
        except Exception as exc:  # noqa: BLE001 - tracing to ATen failed: this graph runs in eager
            # Dynamo's RestartAnalysis (dynamic shapes: TensorifyScalarRestartAnalysis) is its signal to
            # trace again, not a failure: it goes back to Dynamo
            if (isinstance(exc, (OptionError, torch._dynamo.exc.RestartAnalysis))
                    or os.environ.get("POLYTRI_DEBUG", "") not in ("", "0")):
                raise
            warnings.warn(f"polytri: graph runs in eager (tracing to ATen failed: {type(exc).__name__}: {exc})",
                          stacklevel=2)
            log.warning("graph runs in eager: tracing to ATen failed: %s", exc)
            _record(GraphReport([], sorted({str(n.target) for n in gm.graph.nodes if n.op == "call_function"}),
                                [], error=f"{type(exc).__name__}: {exc}"))
            return gm.forward

    def _compile_forward(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        """AOTAutograd's forward compiler (an ``AOTDispatchCompiler``: these parameter names): the ATen
        graph compiled with polytri, as a boxed function."""
        from torch._functorch.aot_autograd import make_boxed_func
        return make_boxed_func(compile_graph(gm, example_inputs, self.options))

    def __eq__(self, other: object) -> bool:
        if self.reports is not None or not isinstance(other, PolytriBackend) or other.reports is not None:
            return self is other  # one that keeps reports is its function's own
        return self.options == other.options

    def __hash__(self) -> int:
        return hash(self.options)


_BACKENDS: dict[TorchOptions, PolytriBackend] = {}


def backend_for(options: Mapping[str, Any] | None) -> PolytriBackend:
    """The one backend object of an option set."""
    opts = check_options(options)
    with _LOCK:
        if opts not in _BACKENDS:
            _BACKENDS[opts] = PolytriBackend(dict(options or {}))
        return _BACKENDS[opts]


def polytri_backend(gm: fx.GraphModule, example_inputs: Sequence[Any], options: Mapping[str, Any] | None = None,
                    **kwargs: Any) -> Callable[..., Any]:
    """The function registered as ``torch.compile(..., backend="polytri")``."""
    if kwargs.get("mode") not in (None, "default"):
        raise OptionError(f"torch.compile mode {kwargs['mode']!r} is not supported by polytri; use options=")
    return backend_for(options)(gm, example_inputs)


def register() -> None:
    """Register ``polytri`` with Dynamo (idempotent)."""
    from torch._dynamo.backends.registry import _BACKENDS, _COMPILER_FNS, register_backend
    if "polytri" in _COMPILER_FNS or _BACKENDS.get("polytri") is not None:
        return  # registered, or being loaded through the entry point (Dynamo registers it then)
    register_backend(polytri_backend, name="polytri")


register()
