"""``polytri.tf.explain``: what polytri made of a TensorFlow function, as ``pt.explain``'s report."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .tf_function import TfFunction
from .torch_backend import GraphReport, recording
from .torch_explain import ExplainReport, report_of


def explain(fn: Callable[..., Any], *args: Any, compile_options: Mapping[str, Any] | None = None,
            **kwargs: Any) -> ExplainReport:
    """Compile ``fn`` for ``args`` afresh and report its kernels, the operations that ran outside polytri
    (TensorFlow operations by type, ATen ops that ran in eager) and the fusion groups.  ``fn`` may be a
    ``polytri.tf.jit`` function: its options and input signature are used unless options are given."""
    signature = None
    if isinstance(fn, TfFunction):
        if compile_options is None:
            compile_options = fn.compile_options
        signature = fn.input_signature
        fn = fn.fn
    fresh = TfFunction(fn, input_signature=signature, compile_options=compile_options)
    records: list[GraphReport] = []
    with recording(records):
        result = fresh(*args, **kwargs)
    # an operation's several results are taken from its tuple by getitem nodes: not ops of their own
    return report_of(records, result, not_ops=("getitem",))
