"""A TensorFlow operation run through TensorFlow itself, as one node of an ATen graph (the planner leaves
it to eager); the same machinery evaluates operations on constants while translating (shape arithmetic).

The operation is copied into a graph of its own, whose inputs are placeholders for its operands that are
not constants (the constant ones are ``Const`` nodes of that graph), and pruned into a function of those
placeholders (``tf.compat.v1.wrap_function``).  The node's target is a :class:`TfOpCall`, whose
``__name__`` is the operation's type: what ``explain`` lists among the fallback ops.  Its first argument is
a token naming the operation and its attributes, so that the graph's code (part of the graph cache's key)
tells two such calls apart.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from .tf_convert import to_tf, to_torch


def op_function(op: Any, constants: Mapping[int, np.ndarray], library: Any) -> Any:
    """A function of ``op``'s non-constant operands (in order) returning the list of its outputs."""
    import tensorflow as tf

    gd = tf.compat.v1.GraphDef()
    gd.library.CopyFrom(library)
    feeds = []
    for k, t in enumerate(op.inputs):
        node = gd.node.add()
        node.name = f"in{k}"
        if k in constants:
            node.op = "Const"
            node.attr["dtype"].type = t.dtype.as_datatype_enum
            node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(constants[k], dtype=t.dtype))
        else:
            node.op = "Placeholder"
            node.attr["dtype"].type = t.dtype.as_datatype_enum
            node.attr["shape"].shape.CopyFrom(t.shape.as_proto())
            feeds.append(f"in{k}:0")
    node = gd.node.add()
    node.CopyFrom(op.node_def)
    node.name = "op"
    del node.input[:]
    node.input.extend(f"in{k}" for k in range(len(op.inputs)))
    node.ClearField("device")

    def build() -> None:
        tf.compat.v1.import_graph_def(gd, name="")
    wrapped = tf.compat.v1.wrap_function(build, [])
    get = wrapped.graph.get_tensor_by_name
    return wrapped.prune(feeds=[get(f) for f in feeds], fetches=[get(f"op:{j}") for j in range(len(op.outputs))])


def evaluate(op: Any, constants: Mapping[int, np.ndarray], library: Any) -> list[np.ndarray]:
    """``op``'s outputs when all its operands are ``constants``."""
    return [np.asarray(o.numpy()) for o in op_function(op, constants, library)()]


class TfOpCall:
    """Runs one TensorFlow operation on the node's tensors (its constant operands are built in)."""

    def __init__(self, op: Any, constants: Mapping[int, np.ndarray], library: Any):
        self.__name__ = str(op.type)
        self.__qualname__ = self.__name__
        self.multiple = len(op.outputs) != 1
        self.token = f"{op.type}:{_digest(op, constants)}"
        self._fn = op_function(op, constants, library)

    def __call__(self, token: str, *tensors: torch.Tensor) -> Any:
        outs = [to_torch(o) for o in self._fn(*[to_tf(t) for t in tensors])]
        return tuple(outs) if self.multiple else outs[0]

    def __repr__(self) -> str:
        return f"TfOpCall({self.token})"


def _digest(op: Any, constants: Mapping[int, np.ndarray]) -> str:
    """A digest of the operation's definition (attributes, the functions it names), its operands' types and
    shapes and its constant operands."""
    node = type(op.node_def)()
    node.CopyFrom(op.node_def)
    node.name = ""
    del node.input[:]
    node.ClearField("device")
    h = hashlib.sha256(node.SerializeToString(deterministic=True))
    for k, t in enumerate(op.inputs):
        h.update(f"{k}:{t.dtype.name}:{t.shape}".encode())
        if k in constants:
            h.update(np.ascontiguousarray(constants[k]).tobytes())
    return h.hexdigest()[:12]
