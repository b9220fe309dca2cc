"""Reductions of JAX: ``reduce_sum / max / min / and / or``, ``argmax / argmin``, ``cumsum``, and the
pooling windows ``reduce_window_max`` (ATen max pooling) and ``reduce_window_sum`` (a convolution with a
window of ones)."""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch

from .jax_graph import GraphBuilder, Operand, shape_of
from .jax_ops_shape import permute, reshape
from .jax_rules import Declined, Eqn, rule, torch_dtype

aten = torch.ops.aten

_REDUCE = {"reduce_max": aten.amax.default, "reduce_min": aten.amin.default}


@rule("reduce_sum", "reduce_max", "reduce_min", "reduce_and", "reduce_or")
def _reduce(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    x = b.tensor(e.args[0])
    axes = [int(a) for a in e.params["axes"]]
    if not axes:
        return [x]
    if e.primitive == "reduce_sum":  # in the input's dtype (torch would sum integers in int64)
        return [b.call(aten.sum.dim_IntList, x, axes, False, dtype=e.out.dtype)]
    if e.primitive in ("reduce_and", "reduce_or"):
        if e.out.dtype != torch.bool:
            raise Declined(f"{e.primitive} of integers (bitwise)")
        op = aten.all.dims if e.primitive == "reduce_and" else aten.any.dims
        return [b.call(op, x, axes)]
    return [b.call(_REDUCE[e.primitive], x, axes)]


@rule("argmax", "argmin")
def _arg(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    axes = [int(a) for a in e.params["axes"]]
    if len(axes) != 1:
        raise Declined(f"{e.primitive} over {len(axes)} axes")
    op = aten.argmax.default if e.primitive == "argmax" else aten.argmin.default
    idx = b.call(op, b.tensor(e.args[0]), axes[0])
    dtype = torch_dtype(e.params["index_dtype"])
    return [idx if dtype == torch.int64 else b.call(aten._to_copy.default, idx, dtype=dtype)]


@rule("cumsum")
def _cumsum(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    if e.params.get("reverse"):
        raise Declined("a reversed cumsum")
    return [b.call(aten.cumsum.default, b.tensor(e.args[0]), int(e.params["axis"]), dtype=e.out.dtype)]


def _window(e: Eqn, rank: int) -> tuple[list[int], list[int], list[int]]:
    """The pooled dimensions (at most two; the last ones completed with windows of one), and the
    others."""
    p = e.params
    if any(int(d) != 1 for d in p["base_dilation"]):
        raise Declined("a window over a dilated base")
    pooled = [d for d in range(rank) if int(p["window_dimensions"][d]) != 1 or int(p["window_strides"][d]) != 1
              or tuple(p["padding"][d]) != (0, 0) or int(p["window_dilation"][d]) != 1]
    if len(pooled) > 2:
        raise Declined(f"a window over {len(pooled)} dimensions")
    for d in range(rank - 1, -1, -1):
        if len(pooled) == 2:
            break
        if d not in pooled:
            pooled.insert(0, d)
    pooled.sort()
    if len(pooled) != 2:
        raise Declined("a window over an array of rank < 2")
    rest = [d for d in range(rank) if d not in pooled]
    return pooled, rest, rest + pooled


def _images(b: GraphBuilder, x: Operand, rest: list[int], order: list[int], channel: bool) -> tuple[Operand, int]:
    """``x`` with the pooled dimensions last and the others flattened into one (and a channel of one)."""
    shape = shape_of(b.tensor(x))
    lead = 1
    for d in rest:
        lead *= shape[d]
    spatial = [shape[d] for d in order[len(rest):]]
    return reshape(b, permute(b, x, order), [lead, 1, *spatial] if channel else [lead, *spatial]), lead


def _unpooled(b: GraphBuilder, y: Operand, e: Eqn, rest: list[int], order: list[int]) -> Operand:
    out = e.out.shape
    y = reshape(b, y, [out[d] for d in order])
    inv = [0] * len(order)
    for k, d in enumerate(order):
        inv[d] = k
    return permute(b, y, inv)


def _pads(e: Eqn, pooled: list[int]) -> list[int]:
    pads: list[int] = []
    for d in reversed(pooled):
        lo, hi = (int(v) for v in e.params["padding"][d])
        pads += [lo, hi]
    return pads


@rule("reduce_window_max")
def _max_window(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    if not e.out.dtype.is_floating_point:
        raise Declined("max pooling of integers")
    rank = len(e.out.shape)
    pooled, rest, order = _window(e, rank)
    x, _ = _images(b, e.args[0], rest, order, channel=False)
    pads = _pads(e, pooled)
    if any(pads):  # padding with -inf: it never wins, as in reduce_window's init value
        x = b.call(aten.constant_pad_nd.default, b.tensor(x), pads, float("-inf"))
    p = e.params
    pooled_tuple = b.call(aten.max_pool2d_with_indices.default, b.tensor(x),
                          [int(p["window_dimensions"][d]) for d in pooled],
                          [int(p["window_strides"][d]) for d in pooled], [0, 0],
                          [int(p["window_dilation"][d]) for d in pooled])
    values = b.opaque(operator.getitem, (pooled_tuple, 0), {}, pooled_tuple.meta["val"][0])
    return [_unpooled(b, values, e, rest, order)]


@rule("reduce_window_sum")
def _sum_window(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    dtype = e.out.dtype
    if not dtype.is_floating_point:
        raise Declined("sum pooling of integers")
    rank = len(e.out.shape)
    pooled, rest, order = _window(e, rank)
    x, _ = _images(b, e.args[0], rest, order, channel=True)
    p = e.params
    kernel = [int(p["window_dimensions"][d]) for d in pooled]
    ones = b.call(aten.full.default, [1, 1, *kernel], 1.0, dtype=dtype)
    pads = _pads(e, pooled)
    sym = [pads[2], pads[0]]  # (rows, columns)
    if pads[0] != pads[1] or pads[2] != pads[3] or min(pads) < 0:
        x, sym = b.call(aten.constant_pad_nd.default, b.tensor(x), pads, 0.0), [0, 0]
    y = b.call(aten.convolution.default, b.tensor(x), ones, None, [int(p["window_strides"][d]) for d in pooled], sym,
               [int(p["window_dilation"][d]) for d in pooled], False, [0, 0], 1)
    return [_unpooled(b, y, e, rest, order)]
