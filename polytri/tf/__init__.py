"""polytri for TensorFlow: ``polytri.tf.jit`` and ``polytri.tf.explain``.

A TensorFlow function is traced with ``tf.function`` into a graph (its concrete function for the call's
shapes and dtypes), whose operations are translated into an ATen graph and compiled by the same machinery
as ``pt.jit`` (planning, fusion, the cpu / nvgpu / amdgpu targets, the caches, fallback); operations polytri
does not translate run through TensorFlow.  TensorFlow is an optional dependency (``pip install
polytri[tensorflow]``): importing this module does not import it, using it without it raises
:class:`polytri.errors.MissingExtraError`.  See docs/tensorflow.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..codegen_triton.loader import triton_before_dynamo
from ..errors import public
from ..frontend.tf_capture import require_tf

__all__ = ["explain", "jit"]


@public
def jit(fn: Callable[..., Any] | None = None, *, input_signature: Sequence[Any] | None = None,
        compile_options: Mapping[str, Any] | None = None) -> Any:
    """Compile a TensorFlow function with polytri: ``polytri.tf.jit(fn, ...)`` or ``@polytri.tf.jit(...)``.

    ``input_signature`` has ``tf.function``'s meaning (a ``tf.TensorSpec`` per argument: the arguments are
    converted to its dtypes and checked against its shapes).  Arguments are TensorFlow tensors, numpy
    arrays or nests of them; Python values among them are compile-time constants, as in ``tf.function``.
    ``compile_options`` are ``pt.jit``'s (checked at once: :class:`polytri.OptionError`).  Each new
    signature (shapes, dtypes, Python values) compiles once; the result's ``compiles`` counts them.  Calls
    return TensorFlow tensors."""
    require_tf()
    triton_before_dynamo()
    from ..frontend.tf_function import TfFunction
    from ..frontend.torch_options import check_options

    check_options(compile_options)  # at once, for the decorator form too

    def wrap(f: Callable[..., Any]) -> Any:
        return TfFunction(f, input_signature=input_signature, compile_options=compile_options)
    return wrap(fn) if fn is not None else wrap


@public
def explain(fn: Callable[..., Any], *args: Any, compile_options: Mapping[str, Any] | None = None,
            **kwargs: Any) -> Any:
    """Compile ``fn`` for ``args`` afresh and report what polytri made of it: the report type of
    ``pt.explain`` (``.kernels``, ``.fallback_ops`` with the TensorFlow operations that ran in TensorFlow
    by their type, ``.fusion_groups``, ``.result``...)."""
    require_tf()
    triton_before_dynamo()
    from ..frontend.tf_explain import explain as _explain
    return _explain(fn, *args, compile_options=compile_options, **kwargs)
