"""``pt.explain(fn, *args, compile_options=...)``: what polytri made of a PyTorch function."""

from __future__ import annotations

import dataclasses
import itertools
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .torch_backend import GraphReport, PolytriBackend, recording
from .torch_runtime import KernelInfo


@dataclass
class ExplainReport:
    """Kernels, eager fallbacks and fusion groups of every graph of one call."""

    kernels: list[KernelInfo] = field(default_factory=list)
    """Compiled programs: ``.name``, ``.target``, ``.source`` (and ``.program``, ``.nodes``)."""
    fallback_ops: list[str] = field(default_factory=list)
    """ATen ops that ran in eager (``aten.sort.default``...)."""
    fusion_groups: list[list[str]] = field(default_factory=list)
    """FX nodes computed together in one statement (elementwise chains inlined into their consumer)."""
    graphs: list[GraphReport] = field(default_factory=list)
    """The per-graph reports."""
    errors: list[str] = field(default_factory=list)
    """Why a graph ran in eager entirely, if one did."""
    declined: dict[str, str] = field(default_factory=dict)
    """Nodes with a handler that declined (node name -> reason)."""
    result: Any = None
    """What the compiled ``fn`` returned for ``args`` (equal to eager's result)."""

    def __str__(self) -> str:
        lines = [f"polytri: {len(self.graphs)} graph(s), {len(self.kernels)} kernel(s), "
                 f"{len(self.fallback_ops)} op(s) in eager"]
        for k in self.kernels:
            lines.append(f"  kernel {k.name} (target {k.target}): {len(k.nodes)} node(s): {', '.join(k.nodes)}")
            if k.bytes_moved is not None and k.unfused_bytes:
                lines.append(f"    estimated global memory traffic: {_size(k.bytes_moved)}, against "
                             f"{_size(k.unfused_bytes)} unfused (one kernel per operator): "
                             f"{k.bytes_moved / k.unfused_bytes:.2f}x")
            lines += [f"    {r}" for r in k.rewrites]
            lines += [f"    {r}" for r in k.runtime]
        if self.fusion_groups:
            lines.append("fusion groups (one statement each):")
            lines += [f"  {' + '.join(g)}" for g in self.fusion_groups]
        lines.append("fallback ops (eager): " + (", ".join(self.fallback_ops) if self.fallback_ops else "none"))
        for name, why in self.declined.items():
            lines.append(f"  {name}: {why}")
        for e in self.errors:
            lines.append(f"graph in eager: {e}")
        return "\n".join(lines)


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


_CALLS = itertools.count()


def unwrap_compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The function or module under ``pt.jit`` / ``torch.compile`` wrappers (``fn`` itself if none).
    Calling a wrapper runs what it compiled before, from Dynamo's cache, whatever its backend: a report
    on it would be empty once the function has run."""
    import inspect
    while True:
        inner = getattr(fn, "_orig_mod", None)  # a compiled nn.Module
        if inner is None:
            unwrapped = inspect.unwrap(fn)
            inner = unwrapped if unwrapped is not fn else None
        if inner is None:
            return fn
        fn = inner


def _fresh_frame(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with a code object of its own.  Dynamo caches compiled frames on their code object, whatever
    the backend: explaining ``fn`` a second time would run the first compilation and report nothing.  A
    plain function is copied (its globals stay its module's); anything else (a module, a bound method)
    is called from a new function."""
    name = f"pt_explain_{next(_CALLS)}"
    if isinstance(fn, types.FunctionType):
        copy = types.FunctionType(fn.__code__.replace(co_name=name), fn.__globals__, fn.__name__,
                                  fn.__defaults__, fn.__closure__)
        copy.__kwdefaults__ = fn.__kwdefaults__
        return copy

    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)
    call.__code__ = call.__code__.replace(co_name=name)
    return call


def explain(fn: Callable[..., Any], *args: Any, compile_options: Mapping[str, Any] | None = None,
            **kwargs: Any) -> ExplainReport:
    """Compile ``fn`` for ``args`` with polytri (a fresh compilation) and report what happened."""
    import torch

    with recording([]) as records:
        compiled = torch.compile(_fresh_frame(unwrap_compiled(fn)), backend=PolytriBackend(compile_options))
        result = compiled(*args, **kwargs)
    return report_of(records, result)


def explain_jit(fn: Callable[..., Any], backend: PolytriBackend, *args: Any, **kwargs: Any) -> ExplainReport:
    """The report of a ``pt.jit`` function whose ``backend`` keeps the reports of its graphs: it runs on
    ``args`` (compiling only what it has not compiled yet) and reports every graph it compiled.  If it ran
    graphs compiled by another backend (Dynamo shares compiled frames of equal code), it is compiled
    afresh instead."""
    assert backend.reports is not None
    result = fn(*args, **kwargs)
    if not backend.reports:
        return explain(fn, *args, compile_options=dataclasses.asdict(backend.options), **kwargs)
    return report_of(list(backend.reports), result)


def report_of(records: list[GraphReport], result: Any, *, not_ops: tuple[str, ...] = ()) -> ExplainReport:
    """One report over the graphs of ``records``; the eager nodes named in ``not_ops`` are not listed as
    fallback ops."""
    report = ExplainReport(graphs=records, result=result)
    for g in records:
        report.kernels += g.kernels
        report.fusion_groups += g.fusion_groups
        report.declined.update(g.declined)
        for op in g.fallback_ops:
            if op not in report.fallback_ops and op not in not_ops:
                report.fallback_ops.append(op)
        if g.error:
            report.errors.append(g.error)
    return report
