"""polytri for JAX: ``polytri.jax.jit`` and ``polytri.jax.explain``.

A JAX function is captured as a jaxpr, translated into an ATen graph and compiled by the same machinery
as ``pt.jit`` (planning, fusion, the cpu / nvgpu / amdgpu targets, the caches, fallback); primitives
polytri does not translate run through JAX.  JAX is an optional dependency (``pip install
polytri[jax]``): importing this module does not import it, using it without it raises
:class:`polytri.errors.MissingExtraError`.  See docs/jax.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import public
from .frontend.jax_capture import require_jax

__all__ = ["explain", "jit"]


@public
def jit(fn: Callable[..., Any] | None = None, *, compile_options: Mapping[str, Any] | None = None,
        static_argnums: int | Sequence[int] = ()) -> Any:
    """Compile a JAX function with polytri: ``polytri.jax.jit(fn, ...)`` or ``@polytri.jax.jit(...)``.

    ``compile_options`` are ``pt.jit``'s (checked at once: :class:`polytri.OptionError`).  Arguments at
    ``static_argnums`` are compile-time constants (hashable, compared by value); the others are pytrees of
    arrays.  Each new signature (shapes, dtypes, static values) compiles once; the result's ``compiles``
    counts them.  Calls return JAX arrays."""
    require_jax()
    from .frontend.jax_function import JaxFunction
    from .frontend.torch_options import check_options

    check_options(compile_options)  # at once, for the decorator form too

    def wrap(f: Callable[..., Any]) -> Any:
        return JaxFunction(f, compile_options, static_argnums)
    return wrap(fn) if fn is not None else wrap


@public
def explain(fn: Callable[..., Any], *args: Any, compile_options: Mapping[str, Any] | None = None,
            static_argnums: int | Sequence[int] | None = None, **kwargs: Any) -> Any:
    """Compile ``fn`` for ``args`` afresh and report what polytri made of it: the report type of
    ``pt.explain`` (``.kernels``, ``.fallback_ops`` with the JAX primitives that ran in JAX by name,
    ``.fusion_groups``, ``.result``...)."""
    require_jax()
    from .frontend.jax_explain import explain as _explain
    return _explain(fn, *args, compile_options=compile_options, static_argnums=static_argnums, **kwargs)
