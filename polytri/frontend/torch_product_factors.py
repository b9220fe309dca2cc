"""Widening conversions and scalar factors of matrix-product operands, moved onto the product.

Attention in 16-bit floats, as torch decomposes it for the CPU, converts ``q`` and ``k`` to float32,
multiplies each by a scale, and multiplies the two in float32 (``bmm``)::

    bmm(view(expand(mul(float32(q), s))), view(expand(mul(permute(float32(k)), s))))

Products of two 16-bit floats are exact in float32, so the same scores are ``s * s`` times the product of
the 16-bit values, summed in float32: the form of a 16-bit linear layer, which the CPU generator computes
on its packed 16-bit panels with the machine's dot-product instructions (AMX tiles, ``vdpbf16ps``)
instead of a float32 micro-kernel.  :func:`move_product_factors` rewrites the graph to

    mul(bmm(float32(view(expand(q))), float32(view(expand(permute(k))))), s * s)

(views commute with elementwise conversions and scalar multiplications) when *both* operands of a
``bmm`` or ``mm`` are such chains from the same 16-bit type; the product's lowering
(:mod:`.torch_ops_linalg`) then reads the 16-bit values.  The scale is applied once to the float32 sums
instead of to each factor: one rounding fewer per factor, the sums in the same float32.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from .torch_lower import tensor_meta

log = logging.getLogger("polytri.torch")

aten = torch.ops.aten

#: Ops that only change how elements are indexed: they commute with elementwise ops.
_VIEWS = frozenset({aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default,
                    aten.permute.default, aten.transpose.int, aten.t.default, aten.unsqueeze.default,
                    aten.squeeze.dim, aten.squeeze.dims})
_CASTS = frozenset({aten._to_copy.default, torch.ops.prims.convert_element_type.default})
_PRODUCTS = frozenset({aten.bmm.default, aten.mm.default})
_NARROW = (torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class _Chain:
    """An operand of a product: ``views`` (from the product's side down) of ``factor`` times the float32
    conversion of ``base``, a tensor of a 16-bit float type."""

    views: tuple[fx.Node, ...]
    factor: float
    base: fx.Node


def widening(node: fx.Node) -> bool:
    """Whether ``node`` converts a 16-bit float tensor to float32 and does nothing else."""
    if node.target not in _CASTS or not isinstance(node.args[0], fx.Node):
        return False
    src, out = tensor_meta(node.args[0]), tensor_meta(node)
    if src is None or out is None:
        return False
    extra = set(node.kwargs) - {"dtype", "layout", "device", "memory_format"}
    return (src.dtype in _NARROW and out.dtype == torch.float32 and not extra and len(node.args) <= 2
            and out.device == src.device and node.kwargs.get("memory_format") in (None, torch.preserve_format))


def _scalar_factor(node: fx.Node) -> float | None:
    """``s`` when ``node`` is ``x * s`` with a Python number ``s`` (finite), else ``None``."""
    if node.target not in (aten.mul.Scalar, aten.mul.Tensor) or len(node.args) != 2 or node.kwargs:
        return None
    s = node.args[1]
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s):
        return None
    return float(s)


def _chain(node: Any) -> _Chain | None:
    """``node`` as a :class:`_Chain`, each of its nodes read by the next one only (else ``None``)."""
    views: list[fx.Node] = []
    factor = 1.0
    while isinstance(node, fx.Node) and len(node.users) == 1:
        if node.target in _VIEWS:
            views.append(node)
        elif (s := _scalar_factor(node)) is not None:
            factor *= s
        elif widening(node):
            base = node.args[0]
            assert isinstance(base, fx.Node)  # widening() checks it
            return _Chain(tuple(views), factor, base)
        else:
            return None
        node = node.args[0]
    return None


def _call(graph: fx.Graph, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], like: fx.Node,
          made: list[fx.Node]) -> fx.Node:
    """A new node ``target(*args, **kwargs)`` whose value is computed on the fake values of its inputs."""
    node = graph.call_function(target, args, kwargs)
    made.append(node)
    fakes = fx.node.map_arg(args, lambda a: a.meta["val"])
    with tensor_meta(args[0]).fake_mode:  # type: ignore[union-attr]  # a FakeTensor
        node.meta["val"] = target(*fakes, **kwargs)
    node.meta["stack_trace"] = like.meta.get("stack_trace")
    return node


def _narrow_operand(graph: fx.Graph, chain: _Chain, made: list[fx.Node]) -> fx.Node:
    """The chain's views applied to its 16-bit base, then converted to float32 (the new nodes are
    appended to ``made``)."""
    x = chain.base
    for v in reversed(chain.views):
        x = _call(graph, v.target, (x, *v.args[1:]), dict(v.kwargs), v, made)
    return _call(graph, aten._to_copy.default, (x,), {"dtype": torch.float32}, chain.base, made)


def move_product_factors(graph: fx.Graph) -> int:
    """Rewrite each ``bmm`` / ``mm`` of two float32-converted 16-bit operands (through views and scalar
    factors) as described in the module's docstring; returns the number of products rewritten."""
    done = 0
    for p in [n for n in graph.nodes if n.op == "call_function" and n.target in _PRODUCTS]:
        a, b = _chain(p.args[0]), _chain(p.args[1])
        if a is None or b is None:
            continue
        ta, tb = tensor_meta(a.base), tensor_meta(b.base)
        if ta is None or tb is None or ta.dtype != tb.dtype:
            continue
        made: list[fx.Node] = []
        with graph.inserting_before(p):
            try:
                operands = (_narrow_operand(graph, a, made), _narrow_operand(graph, b, made))
            except Exception as exc:  # noqa: BLE001 - any failure (a view torch refuses on these strides)
                log.debug("%s keeps its float32 factors: %s", p.name, exc)  # and the product stays as it is
                for n in reversed(made):
                    graph.erase_node(n)
                continue
            q = graph.call_function(p.target, operands)
            q.meta.update(p.meta)
            out = q
            if a.factor * b.factor != 1.0:
                out = graph.call_function(aten.mul.Scalar, (q, a.factor * b.factor))
                out.meta.update(p.meta)
        p.replace_all_uses_with(out)
        graph.erase_node(p)
        done += 1
    if done:
        graph.eliminate_dead_code()  # the factors' old chains
        graph.lint()
        log.debug("%d product(s) of 16-bit operands read their 16-bit values", done)
    return done
