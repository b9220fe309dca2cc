"""``@pt.jit`` and ``pt.explain``: PyTorch functions through polytri (PolyBlocks-style decorators).

torch is imported only when one of them is used, so ``import polytri`` stays light.  When torch's
Dynamo is already loaded, importing polytri registers the ``polytri`` backend with it; otherwise the
``torch_dynamo_backends`` entry point (or the first use of ``pt.jit``) does.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping
from typing import Any, overload


@overload
def jit(fn: Callable[..., Any], *, compile_options: Mapping[str, Any] | None = None,
        dynamic: bool | None = None) -> Callable[..., Any]: ...


@overload
def jit(fn: None = None, *, compile_options: Mapping[str, Any] | None = None,
        dynamic: bool | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...


def jit(fn: Callable[..., Any] | None = None, *, compile_options: Mapping[str, Any] | None = None,
        dynamic: bool | None = None) -> Any:
    """Compile a PyTorch function (or ``nn.Module``) with polytri: ``pt.jit(fn, compile_options={...})`` or
    ``@pt.jit(compile_options={'target': 'cpu'})``.  Options are checked at once (``OptionError``)."""
    from .torch_backend import backend_for

    backend = backend_for(compile_options)

    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        import torch
        compiled = torch.compile(f, backend=backend, dynamic=dynamic)
        out = compiled if isinstance(f, torch.nn.Module) else functools.wraps(f)(compiled)
        out.__dict__[JIT_OPTIONS] = dict(compile_options or {})  # for pt.explain
        return out
    return wrap(fn) if fn is not None else wrap


JIT_OPTIONS = "_polytri_compile_options"
"""The attribute of a ``pt.jit`` function or module that keeps its ``compile_options``."""


def explain(fn: Callable[..., Any], *args: Any, compile_options: Mapping[str, Any] | None = None,
            **kwargs: Any) -> Any:
    """Compile ``fn`` on ``args`` and report its kernels (name, target, source), the ATen ops that ran in
    eager (``.fallback_ops``) and the fusion groups; ``str()`` is a readable summary.  ``fn`` may be a
    ``pt.jit`` or ``torch.compile`` function or module, called before or not: the report compiles the
    function under it afresh, with ``compile_options`` or else the ``pt.jit`` wrapper's own."""
    from .torch_explain import explain as _explain
    if compile_options is None:
        compile_options = getattr(fn, JIT_OPTIONS, None)
    return _explain(fn, *args, compile_options=compile_options, **kwargs)


if "torch._dynamo" in sys.modules:  # registering costs nothing once Dynamo is loaded
    from . import torch_backend as _torch_backend  # noqa: F401
