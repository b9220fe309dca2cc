"""``polytri.jax.explain``: what polytri made of a JAX function, as ``pt.explain``'s report."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .jax_function import JaxFunction
from .torch_backend import _LOCK, _RECORDERS, GraphReport
from .torch_explain import ExplainReport, report_of


def explain(fn: Callable[..., Any], *args: Any, compile_options: Mapping[str, Any] | None = None,
            static_argnums: int | Sequence[int] | None = None, **kwargs: Any) -> ExplainReport:
    """Compile ``fn`` for ``args`` afresh and report its kernels, the ops that ran outside polytri (JAX
    primitives by name, ATen ops that ran in eager) and the fusion groups.  ``fn`` may be a
    ``polytri.jax.jit`` function: its options and ``static_argnums`` are used unless given."""
    if isinstance(fn, JaxFunction):
        if compile_options is None:
            compile_options = fn.compile_options
        if static_argnums is None:
            static_argnums = fn.static_argnums
        fn = fn.fn
    fresh = JaxFunction(fn, compile_options, static_argnums or ())
    records: list[GraphReport] = []
    with _LOCK:
        _RECORDERS.append(records)
    try:
        result = fresh(*args, **kwargs)
    finally:
        with _LOCK:
            _RECORDERS.remove(records)
    return _report(records, result)


def _report(records: list[GraphReport], result: Any) -> ExplainReport:
    # a JAX primitive's results are taken from its tuple by getitem nodes: not ops of their own
    return report_of(records, result, not_ops=("getitem",))
