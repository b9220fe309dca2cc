"""An ATen FX graph built node by node, each node's ``meta['val']`` a fake tensor (as the planner reads it).

The JAX frontend translates a jaxpr into such a graph: every call goes through :meth:`GraphBuilder.call`,
which runs the ATen op on the fake values of its arguments to get the node's value, so shapes and dtypes
are torch's own.  Nodes made for one jaxpr equation can be taken back (:meth:`rollback`) when its
translation turns out wrong, and that equation then runs through JAX instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode


@dataclass(frozen=True)
class Const:
    """A scalar constant of a jaxpr (a literal): its Python value and its dtype."""

    value: int | float | bool
    dtype: torch.dtype


Operand = fx.Node | Const
"""A translated jaxpr value: a graph node (a tensor) or a scalar constant."""


class GraphBuilder:
    """An FX graph of ATen calls with fake-tensor values, and the constants its ``get_attr`` nodes read."""

    def __init__(self) -> None:
        self.graph = fx.Graph()
        self.mode = FakeTensorMode()
        self.root = torch.nn.Module()
        self._made: list[fx.Node] = []
        self._consts = 0

    def placeholder(self, name: str, shape: Sequence[int], dtype: torch.dtype) -> fx.Node:
        node = self.graph.placeholder(name)
        node.meta["val"] = self.mode.from_tensor(torch.empty(tuple(shape), dtype=dtype))
        return node

    def constant(self, value: torch.Tensor) -> fx.Node:
        """A ``get_attr`` node reading ``value`` (a constant array of the jaxpr)."""
        name = f"const{self._consts}"
        self._consts += 1
        self.root.register_buffer(name, value)
        node = self.graph.get_attr(name)
        node.meta["val"] = self.mode.from_tensor(value)
        self._made.append(node)
        return node

    def call(self, target: Callable[..., Any], *args: Any, **kwargs: Any) -> fx.Node:
        """A ``call_function`` node of ATen op ``target``; its value is the op run on fake tensors."""
        fargs = fx.node.map_arg(args, _fake)
        fkwargs = fx.node.map_arg(kwargs, _fake)
        with self.mode:
            val = target(*fargs, **fkwargs)
        return self.opaque(target, args, kwargs, val)

    def opaque(self, target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], val: Any) -> fx.Node:
        """A ``call_function`` node whose value ``val`` is given (a function torch cannot run on fakes)."""
        node = self.graph.create_node("call_function", target, args, kwargs, name=_node_name(target))
        node.meta["val"] = val
        self._made.append(node)
        return node

    def fake(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        """A fake tensor of this graph's mode."""
        with self.mode:
            return torch.empty(tuple(shape), dtype=dtype)

    def tensor(self, x: Operand) -> fx.Node:
        """``x`` as a tensor node (a 0-d tensor for a constant)."""
        if isinstance(x, fx.Node):
            return x
        return self.call(torch.ops.aten.scalar_tensor.default, x.value, dtype=x.dtype)

    def mark(self) -> int:
        """A point to :meth:`rollback` to."""
        return len(self._made)

    def rollback(self, mark: int) -> None:
        """Remove the nodes made since ``mark`` (latest first: none of them is used elsewhere)."""
        while len(self._made) > mark:
            node = self._made.pop()
            self.graph.erase_node(node)

    def module(self, outputs: Sequence[fx.Node], keep: Callable[[fx.Node], bool]) -> fx.GraphModule:
        """The graph module returning ``outputs`` (a tuple), without the calls whose values nothing reads,
        except those ``keep`` names (they may have effects)."""
        self.graph.output(tuple(outputs))
        # values nothing reads (a loss next to its gradient) are not computed; calls through JAX stay
        self.graph.eliminate_dead_code(is_impure_node=lambda n: n.op != "call_function" or keep(n))
        gm = fx.GraphModule(self.root, self.graph)
        gm.graph.lint()
        return gm


def _node_name(target: Callable[..., Any]) -> str:
    """A node's name: the ATen op's (``convolution``), the JAX primitive's or the function's."""
    packet = getattr(target, "overloadpacket", None)
    return str(getattr(packet, "__name__", None) or getattr(target, "__name__", "call"))


def _fake(node: fx.Node) -> Any:
    return node.meta["val"]


def shape_of(node: fx.Node) -> tuple[int, ...]:
    """The static shape of a node's tensor value."""
    return tuple(int(s) for s in node.meta["val"].shape)


def dtype_of(x: Operand) -> torch.dtype:
    """The dtype of an operand."""
    return x.dtype if isinstance(x, Const) else node_val(x).dtype


def node_val(node: fx.Node) -> torch.Tensor:
    """A node's fake tensor."""
    val = node.meta["val"]
    assert isinstance(val, torch.Tensor), node
    return val
