"""A TensorFlow function compiled by polytri (what ``polytri.tf.jit`` returns).

Each new call signature (the nest of the arguments, each tensor's shape and dtype, the Python values) is
traced with ``tf.function`` into a concrete function, translated into an ATen graph
(:mod:`.tf_translate`) and handed to the PyTorch frontend's :func:`.torch_backend.compile_graph`:
planning, fusion, the targets, the caches, fallback and the explain records are that frontend's.  Calls
convert the TensorFlow tensors to torch tensors (through DLPack, without a copy), run the compiled graph
and convert its results back.  If the graph cannot be translated at all (a dtype torch lacks, a captured
variable, a shape known only at run time), the function runs in TensorFlow itself (its ``tf.function``),
with a warning.
"""

from __future__ import annotations

import functools
import logging
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..codegen_triton.loader import triton_before_dynamo
from ..errors import OptionError, PolytriError
from .tf_capture import CallSplit, Captured, capture, pack, split_call
from .tf_convert import to_tf, to_torch, torch_dtype
from .torch_options import check_options

log = logging.getLogger("polytri.tf")

_LOGGED: set[str] = set()


@dataclass(frozen=True)
class Compiled:
    """One call signature's compiled graph (``graph`` is ``None`` when the function runs in TensorFlow)."""

    graph: Callable[..., Any] | None
    captured: Captured
    dtypes: tuple[torch.dtype, ...]
    """The dtype of each input of the graph."""
    fallbacks: tuple[str, ...]


class TfFunction:
    """A TensorFlow function whose calls run polytri kernels; ``compiles`` counts the signatures compiled."""

    def __init__(self, fn: Callable[..., Any], *, input_signature: Sequence[Any] | None = None,
                 compile_options: Mapping[str, Any] | None = None):
        self.fn = fn
        self.input_signature = None if input_signature is None else list(input_signature)
        self.compile_options = dict(compile_options or {})
        self.options = check_options(compile_options)
        self.compiles = 0
        self._cache: dict[Any, Compiled] = {}
        self._lock = threading.Lock()
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        split = split_call(args, kwargs, self.input_signature)
        with self._lock:
            compiled = self._cache.get(split.key)
        if compiled is None:
            compiled = self._compile(split)
            with self._lock:
                self._cache[split.key] = compiled
        if compiled.graph is None:
            return pack(compiled.captured, compiled.captured.concrete(*split.tensors))
        tensors = [to_torch(x, dtype) for x, dtype in zip(split.tensors, compiled.dtypes)]
        outs = compiled.graph(*tensors)
        return pack(compiled.captured, [to_tf(t) for t in outs])

    def _compile(self, split: CallSplit) -> Compiled:
        triton_before_dynamo()  # before torch_backend, which imports torch._dynamo
        from .tf_translate import translate
        from .torch_backend import GraphReport, _record, compile_graph

        captured = capture(self.fn, split)
        self.compiles += 1
        try:
            dtypes = tuple(torch_dtype(t.dtype) for t in split.tensors)
            translation = translate(captured.concrete, len(split.tensors))
        except (PolytriError, Exception) as exc:  # noqa: BLE001 - the function then runs in TensorFlow
            if isinstance(exc, OptionError):
                raise
            warnings.warn(f"polytri: {_name(self.fn)} runs in TensorFlow: {type(exc).__name__}: {exc}", stacklevel=3)
            log.warning("%s runs in TensorFlow: %s: %s", _name(self.fn), type(exc).__name__, exc)
            _record(GraphReport([], [], [], error=f"{type(exc).__name__}: {exc}"))
            return Compiled(None, captured, (), ())
        for name in translation.fallbacks:
            if name not in _LOGGED:
                _LOGGED.add(name)
                log.info("TensorFlow operation %s is not translated by polytri; it runs in TensorFlow between "
                         "polytri kernels", name)
        examples = [to_torch(x, dtype) for x, dtype in zip(split.tensors, dtypes)]
        graph = compile_graph(translation.module, examples, self.options)
        return Compiled(graph, captured, dtypes, translation.fallbacks)

    @property
    def fallbacks(self) -> list[str]:
        """The operation types that run through TensorFlow in the signatures compiled so far, each once."""
        with self._lock:
            names = [n for c in self._cache.values() for n in c.fallbacks]
        return list(dict.fromkeys(names))

    def cache_clear(self) -> None:
        """Forget the compiled signatures (the kernels stay in polytri's caches)."""
        with self._lock:
            self._cache.clear()


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)
