"""A JAX function compiled by polytri (what ``polytri.jax.jit`` returns).

Each new call signature (the tree of the dynamic arguments, each leaf's shape, dtype and weak type, the
static values) is captured as a jaxpr, translated into an ATen graph (:mod:`.jax_translate`) and handed to
the PyTorch frontend's :func:`.torch_backend.compile_graph`: planning, fusion, the targets, the caches,
fallback and the explain records are that frontend's.  Calls convert the JAX arrays to torch tensors
(through DLPack, without a copy), run the compiled graph and convert its results back.  If the jaxpr
cannot be translated at all (a dtype torch lacks), the function runs in JAX itself, with a warning.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import OptionError, PolytriError
from .framework_function import FrameworkFunction, function_name
from .jax_capture import CallSplit, capture, split_call, static_positions
from .jax_convert import to_jax, to_torch
from .jax_rules import torch_dtype

log = logging.getLogger("polytri.jax")

@dataclass(frozen=True)
class Compiled:
    """One call signature's compiled graph (``graph`` is ``None`` when the function runs in JAX)."""

    graph: Callable[..., Any] | None
    dtypes: tuple[torch.dtype, ...]
    """The dtype of each input of the graph."""
    out_tree: Any
    fallbacks: tuple[str, ...]


class JaxFunction(FrameworkFunction[Compiled]):
    """A JAX function whose calls run polytri kernels; ``compiles`` counts the signatures compiled."""

    framework = "JAX"

    def __init__(self, fn: Callable[..., Any], compile_options: Mapping[str, Any] | None = None,
                 static_argnums: int | Sequence[int] = ()):
        super().__init__(fn, compile_options)
        self.static_argnums = static_positions(static_argnums)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        split = split_call(self.fn, args, kwargs, self.static_argnums)
        compiled = self.compiled(split.key, lambda: self._compile(split, len(args)))
        if compiled.graph is None:
            return self.fn(*args, **kwargs)
        tensors = [_tensor(x, dtype) for x, dtype in zip(split.leaves, compiled.dtypes)]
        outs = compiled.graph(*tensors)
        import jax
        return jax.tree_util.tree_unflatten(compiled.out_tree, [to_jax(t) for t in outs])

    def _compile(self, split: CallSplit, nargs: int) -> Compiled:
        from .jax_translate import translate
        from .torch_backend import GraphReport, _record, compile_graph

        closed, out_tree = capture(self.fn, split, nargs)
        self.compiles += 1
        dtypes = tuple(torch_dtype(v.aval.dtype) for v in closed.jaxpr.invars)
        try:
            translation = translate(closed)
        except (PolytriError, Exception) as exc:  # noqa: BLE001 - the function then runs in JAX, never a crash
            if isinstance(exc, OptionError):
                raise
            warnings.warn(f"polytri: {function_name(self.fn)} runs in JAX: {type(exc).__name__}: {exc}", stacklevel=3)
            log.warning("%s runs in JAX: %s: %s", function_name(self.fn), type(exc).__name__, exc)
            _record(GraphReport([], [], [], error=f"{type(exc).__name__}: {exc}"))
            return Compiled(None, dtypes, out_tree, ())
        self.log_fallbacks(log, translation.fallbacks)
        examples = [_tensor(x, dtype) for x, dtype in zip(split.leaves, dtypes)]
        graph = compile_graph(translation.module, examples, self.options)
        return Compiled(graph, dtypes, out_tree, translation.fallbacks)


def _tensor(x: Any, dtype: torch.dtype) -> torch.Tensor:
    """A dynamic argument as a torch tensor of the jaxpr input's dtype (JAX converts a float64 numpy
    array to float32 when 64-bit types are off, for example)."""
    t = torch.tensor(x, dtype=dtype) if isinstance(x, (bool, int, float)) else to_torch(x)
    return t if t.dtype == dtype else t.to(dtype)

