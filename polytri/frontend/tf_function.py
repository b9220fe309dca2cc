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

import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..codegen_triton.loader import triton_before_dynamo
from ..errors import OptionError, PolytriError
from .framework_function import FrameworkFunction, function_name
from .tf_capture import CallSplit, Captured, capture, pack, split_call
from .tf_convert import to_tf, to_torch, torch_dtype

log = logging.getLogger("polytri.tf")

@dataclass(frozen=True)
class Compiled:
    """One call signature's compiled graph (``graph`` is ``None`` when the function runs in TensorFlow)."""

    graph: Callable[..., Any] | None
    captured: Captured
    dtypes: tuple[torch.dtype, ...]
    """The dtype of each input of the graph."""
    fallbacks: tuple[str, ...]


class TfFunction(FrameworkFunction[Compiled]):
    """A TensorFlow function whose calls run polytri kernels; ``compiles`` counts the signatures compiled."""

    framework = "TensorFlow"

    def __init__(self, fn: Callable[..., Any], *, input_signature: Sequence[Any] | None = None,
                 compile_options: Mapping[str, Any] | None = None):
        super().__init__(fn, compile_options)
        self.input_signature = None if input_signature is None else list(input_signature)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        split = split_call(args, kwargs, self.input_signature)
        compiled = self.compiled(split.key, lambda: self._compile(split))
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
            warnings.warn(f"polytri: {function_name(self.fn)} runs in TensorFlow: {type(exc).__name__}: {exc}", stacklevel=3)
            log.warning("%s runs in TensorFlow: %s: %s", function_name(self.fn), type(exc).__name__, exc)
            _record(GraphReport([], [], [], error=f"{type(exc).__name__}: {exc}"))
            return Compiled(None, captured, (), ())
        self.log_fallbacks(log, translation.fallbacks)
        examples = [to_torch(x, dtype) for x, dtype in zip(split.tensors, dtypes)]
        graph = compile_graph(translation.module, examples, self.options)
        return Compiled(graph, captured, dtypes, translation.fallbacks)

