"""A TensorFlow graph (a concrete function) -> an ATen FX graph that :func:`.torch_backend.compile_graph`
plans, compiles and runs.

The function's inputs become placeholders, its captured tensors and ``Const`` operations constants, and
each operation the ATen calls of its rule (:mod:`.tf_rules`; the rule modules register themselves).
Operations whose operands are all known while translating (shape arithmetic: ``Shape``, ``Pack``,
``StridedSlice`` of shapes...) are evaluated then, by TensorFlow, and never reach the graph.  An operation
without a rule, or whose rule declines or yields a value of another shape or dtype than TensorFlow's,
becomes one node that runs it through TensorFlow (:mod:`.tf_fallback`); the planner leaves such nodes to
eager.
"""

from __future__ import annotations

import logging
import math
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.fx as fx

from ..errors import UnsupportedError
from . import tf_ops_math, tf_ops_nn, tf_ops_shape  # noqa: F401 (rules)
from .jax_graph import Const, GraphBuilder, Operand
from .jax_rules import check_results
from .tf_convert import to_torch, torch_dtype
from .tf_fallback import TfOpCall, evaluate
from .tf_rules import RULES, Declined, Out, TfOp

log = logging.getLogger("polytri.tf")

#: Operations whose value is their input's static shape.
SHAPE_OPS = frozenset({"Shape", "Size", "Rank", "ShapeN"})
#: The largest result (in elements) evaluated while translating.
FOLD_LIMIT = 1 << 16


@dataclass(frozen=True)
class Translation:
    """A graph's ATen graph and the operation types it leaves to TensorFlow."""

    module: fx.GraphModule
    fallbacks: tuple[str, ...]
    """Types of the operations run through TensorFlow, in graph order, each once."""


def translate(concrete: Any, nargs: int) -> Translation:
    """The ATen graph of a concrete function whose first ``nargs`` inputs are the call's tensors (a tuple
    of its outputs)."""
    return _Translator(concrete.graph).run(concrete, nargs)


def _shape(t: Any) -> tuple[int, ...]:
    if not t.shape.is_fully_defined():
        raise UnsupportedError(f"tensor {t.name} has no static shape ({t.shape})")
    return tuple(int(s) for s in t.shape)


def _const(v: np.ndarray, dtype: torch.dtype) -> Const:
    py = v.item()
    return Const(bool(py) if dtype == torch.bool else float(py) if dtype.is_floating_point else int(py), dtype)


class _Translator:
    def __init__(self, graph: Any):
        self.graph = graph
        self.b = GraphBuilder()
        self.env: dict[str, Operand] = {}
        self.values: dict[str, np.ndarray] = {}
        self.fallbacks: list[str] = []
        self._library: Any = None

    def library(self) -> Any:
        """The graph's function library (for operations that call functions: ``While``, ``If``...)."""
        if self._library is None:
            self._library = self.graph.as_graph_def().library
        return self._library

    def run(self, concrete: Any, nargs: int) -> Translation:
        inputs = list(concrete.inputs)
        for k, t in enumerate(inputs[:nargs]):
            self.env[t.name] = self.b.placeholder(f"arg{k}", _shape(t), torch_dtype(t.dtype))
        for t, v in zip(inputs[nargs:], concrete.captured_inputs):
            if t.dtype.name == "resource":
                raise UnsupportedError("the function reads a captured tf.Variable (pass its value as an argument)")
            self.values[t.name] = np.asarray(v.numpy())
        for op in self.graph.get_operations():
            self.op(op)
        outs = [self.output(t) for t in concrete.outputs]
        module = self.b.module(outs, keep=lambda n: isinstance(n.target, TfOpCall))
        return Translation(module, tuple(dict.fromkeys(self.fallbacks)))

    def op(self, op: Any) -> None:
        if op.type in ("Placeholder", "NoOp"):
            name = op.outputs[0].name if op.outputs else ""
            if op.type == "Placeholder" and name not in self.env and name not in self.values:
                raise UnsupportedError(f"placeholder {op.name} is not an input of the function")
            return
        if not op.outputs:
            raise UnsupportedError(f"operation {op.type} ({op.name}) has effects and no outputs")
        if op.type == "Const":
            import tensorflow as tf
            self.values[op.outputs[0].name] = tf.make_ndarray(op.get_attr("value"))
        elif not self._known(op):
            self._translate(op)

    def _known(self, op: Any) -> bool:
        """Evaluate ``op`` now if its outputs can be known while translating."""
        if op.type in SHAPE_OPS and all(t.shape.is_fully_defined() for t in op.inputs):
            self._shapes(op)
            return True
        if op.op_def.is_stateful or not all(t.name in self.values for t in op.inputs):
            return False
        if not all(t.shape.is_fully_defined() and t.shape.num_elements() <= FOLD_LIMIT for t in op.outputs):
            return False
        consts = {k: self.values[t.name] for k, t in enumerate(op.inputs)}
        for t, v in zip(op.outputs, evaluate(op, consts, self.library())):
            self.values[t.name] = v
        return True

    def _shapes(self, op: Any) -> None:
        dtype = op.outputs[0].dtype.as_numpy_dtype
        shapes = [_shape(t) for t in op.inputs]
        if op.type == "ShapeN":
            for t, s in zip(op.outputs, shapes):
                self.values[t.name] = np.array(s, dtype=dtype)
            return
        s = shapes[0]
        value = {"Shape": s, "Size": math.prod(s), "Rank": len(s)}[op.type]
        self.values[op.outputs[0].name] = np.array(value, dtype=dtype)

    def operand(self, t: Any) -> Operand:
        """A graph tensor as an operand: its node, or its value as a constant."""
        if t.name in self.env:
            return self.env[t.name]
        v = self.values[t.name]
        dtype = torch_dtype(t.dtype)
        if v.ndim == 0:
            return _const(v, dtype)
        return self.b.constant(to_torch(v, dtype))

    def output(self, t: Any) -> fx.Node:
        x = self.operand(t)
        if isinstance(x, fx.Node):
            return x
        return self.b.call(torch.ops.aten.full.default, list(_shape(t)), x.value, dtype=x.dtype)

    def _translate(self, op: Any) -> None:
        outs = [Out(_shape(t), torch_dtype(t.dtype)) for t in op.outputs]
        res = self._by_rule(op, outs)
        if res is None:
            self.fallbacks.append(str(op.type))
            res = self._through_tf(op, outs)
        for t, x in zip(op.outputs, res):
            self.env[t.name] = x

    def _by_rule(self, op: Any, outs: list[Out]) -> list[Operand] | None:
        fn = RULES.get(op.type)
        if fn is None:
            return None
        mark = self.b.mark()
        cache: dict[int, Operand] = {}

        def operand(k: int) -> Operand:
            if k not in cache:
                cache[k] = self.operand(op.inputs[k])
            return cache[k]
        try:
            res = list(fn(TfOp(self.b, op, operand, lambda k: self.values.get(op.inputs[k].name), outs)))
            check_results(op.type, res, outs)
            return res
        except (Declined, TypeError, ValueError, IndexError, RuntimeError, KeyError) as exc:
            self.b.rollback(mark)
            log.debug("%s runs through TensorFlow: %s: %s", op.type, type(exc).__name__, exc)
            return None

    def _through_tf(self, op: Any, outs: list[Out]) -> list[Operand]:
        """One node running the operation through TensorFlow (its operands computed at run time as
        arguments, the others built in)."""
        consts = {k: self.values[t.name] for k, t in enumerate(op.inputs) if t.name not in self.env}
        tensors = [self.b.tensor(self.env[t.name]) for k, t in enumerate(op.inputs) if k not in consts]
        call = TfOpCall(op, consts, self.library())
        fakes = [self.b.fake(o.shape, o.dtype) for o in outs]
        node = self.b.opaque(call, (call.token, *tensors), {}, tuple(fakes) if call.multiple else fakes[0])
        if not call.multiple:
            return [node]
        return [self.b.opaque(operator.getitem, (node, k), {}, f) for k, f in enumerate(fakes)]


