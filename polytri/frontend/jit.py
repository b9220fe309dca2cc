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

from ..errors import public


@overload
def jit(fn: Callable[..., Any], *, compile_options: Mapping[str, Any] | None = None,
        dynamic: bool | None = None) -> Callable[..., Any]: ...


@overload
def jit(fn: None = None, *, compile_options: Mapping[str, Any] | None = None,
        dynamic: bool | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...


@public
def jit(fn: Callable[..., Any] | None = None, *, compile_options: Mapping[str, Any] | None = None,
        dynamic: bool | None = None) -> Any:
    """Compile a PyTorch function (or ``nn.Module``) with polytri: ``pt.jit(fn, compile_options={...})`` or
    ``@pt.jit(compile_options={'target': 'cpu'})``.  Options are checked at once (``OptionError``)."""
    from .torch_backend import PolytriBackend, check_options

    check_options(compile_options)

    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        import torch
        backend = PolytriBackend(compile_options, keep_reports=True)  # its own: pt.explain reads its reports
        compiled = torch.compile(f, backend=backend, dynamic=dynamic)
        out = compiled if isinstance(f, torch.nn.Module) else functools.wraps(f)(compiled)
        out.__dict__[JIT_BACKEND] = backend
        return out
    return wrap(fn) if fn is not None else wrap


JIT_BACKEND = "_polytri_backend"
"""The attribute of a ``pt.jit`` function or module that keeps its backend (and the reports of its graphs)."""


@public
def explain(fn: Callable[..., Any], *args: Any, compile_options: Mapping[str, Any] | None = None,
            **kwargs: Any) -> Any:
    """Compile ``fn`` on ``args`` and report its kernels (name, target, source), the ATen ops that ran in
    eager (``.fallback_ops``) and the fusion groups; ``str()`` is a readable summary.

    For a ``pt.jit`` function or module (without other ``compile_options``), the report covers the graphs
    it has compiled, this call's included: what it compiled before is reported, not traced again.  Any
    other function (a ``torch.compile`` one included), or a ``pt.jit`` one given other ``compile_options``,
    is compiled afresh for the report."""
    from .torch_explain import explain as _explain
    from .torch_explain import explain_jit
    backend = getattr(fn, JIT_BACKEND, None)
    if compile_options is None and backend is not None:
        return explain_jit(fn, backend, *args, **kwargs)
    return _explain(fn, *args, compile_options=compile_options, **kwargs)


if "torch._dynamo" in sys.modules:  # registering costs nothing once Dynamo is loaded
    from . import torch_backend as _torch_backend  # noqa: F401


def _list_options() -> None:
    """Append the frontend's options, from their one definition, to ``pt.jit``'s docstring."""
    from ..pipeline.option_doc import options_text
    from .torch_options import TorchOptions
    if jit.__doc__:  # None under python -OO
        jit.__doc__ += f"\n\n{options_text(TorchOptions, 'Options (compile_options)', indent='    ')}"


_list_options()
