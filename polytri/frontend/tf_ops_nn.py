"""Convolutions, bias additions and matrix products of TensorFlow as ATen calls.

A convolution's input is transposed from NHWC to NCHW (a view; a reshape when it has one channel) and its
filter from HWIO to OIHW, and its result back; ``SAME`` padding that differs on the two sides of a
dimension (an even window, or a stride) is an explicit ``constant_pad_nd`` first.  ``BatchMatMulV2``
broadcasts its batch dimensions, flattens them into one and calls ``bmm``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.fx as fx

from .jax_graph import GraphBuilder, Operand, shape_of
from .jax_ops_shape import permute, reshape
from .tf_rules import Declined, TfOp, rule

aten = torch.ops.aten


def _to_channels_first(b: GraphBuilder, x: fx.Node) -> Operand:
    s = shape_of(x)
    if s[-1] == 1:  # one channel: the same order of elements
        return reshape(b, x, [s[0], 1, *s[1:-1]])
    return permute(b, x, [0, len(s) - 1, *range(1, len(s) - 1)])


def _to_channels_last(b: GraphBuilder, y: Operand) -> Operand:
    s = shape_of(b.tensor(y))
    if s[1] == 1:
        return reshape(b, y, [s[0], *s[2:], 1])
    return permute(b, y, [0, *range(2, len(s)), 1])


def _pads(e: TfOp, spatial: Sequence[int], window: Sequence[int], strides: Sequence[int],
          dilations: Sequence[int], channels_last: bool) -> list[tuple[int, int]]:
    """(before, after) padding of each spatial dimension."""
    padding = e.attr("padding")
    if padding == "VALID":
        return [(0, 0)] * len(spatial)
    if padding == "EXPLICIT":
        ex = [int(v) for v in e.attr("explicit_paddings")]
        pairs = [(ex[2 * d], ex[2 * d + 1]) for d in range(len(ex) // 2)]
        return pairs[1:-1] if channels_last else pairs[2:]
    if padding != "SAME":
        raise Declined(f"padding {padding}")
    out = []
    for n, k, s, d in zip(spatial, window, strides, dilations):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        out.append((total // 2, total - total // 2))
    return out


def _spatial(e: TfOp, name: str, channels_last: bool) -> list[int]:
    v = [int(s) for s in e.attr(name, [1, 1, 1, 1])]
    return v[1:-1] if channels_last else v[2:]


def convolution(e: TfOp, w_oihw: Operand, groups: int) -> Operand:
    """``e``'s input convolved with a filter already in OIHW order, in ``e``'s data format."""
    b = e.b
    channels_last = e.attr("data_format", "NHWC") in ("NHWC", "NDHWC")
    x = e.node(0)
    xs = shape_of(x)
    if len(xs) != 4:
        raise Declined(f"a convolution of rank {len(xs)}")
    x = b.tensor(_to_channels_first(b, x)) if channels_last else x
    spatial = list(shape_of(x)[2:])
    window = list(shape_of(b.tensor(w_oihw))[2:])
    strides, dilations = _spatial(e, "strides", channels_last), _spatial(e, "dilations", channels_last)
    pads = _pads(e, spatial, window, strides, dilations, channels_last)
    if any(lo != hi for lo, hi in pads):
        flat = [p for lo_hi in reversed(pads) for p in lo_hi]  # the last dimension first
        x = b.call(aten.constant_pad_nd.default, x, flat, 0.0)
        pads = [(0, 0)] * len(pads)
    y = b.call(aten.convolution.default, x, b.tensor(w_oihw), None, strides, [lo for lo, _ in pads], dilations,
               False, [0] * len(pads), groups)
    return _to_channels_last(b, y) if channels_last else y


@rule("Conv2D")
def _conv2d(e: TfOp) -> Sequence[Operand]:
    if not e.out.dtype.is_floating_point:
        raise Declined(f"a convolution producing {e.out.dtype}")
    w = e.node(1)
    kh, kw, cin, _ = shape_of(w)
    xs = e.shape(0)
    channels = xs[-1] if e.attr("data_format", "NHWC") == "NHWC" else xs[1]
    if channels % cin:
        raise Declined("input channels not a multiple of the filter's")
    return [convolution(e, permute(e.b, w, [3, 2, 0, 1]), channels // cin)]


@rule("DepthwiseConv2dNative")
def _depthwise(e: TfOp) -> Sequence[Operand]:
    if not e.out.dtype.is_floating_point:
        raise Declined(f"a convolution producing {e.out.dtype}")
    b = e.b
    w = e.node(1)
    kh, kw, c, m = shape_of(w)
    # output channel c * m + j reads input channel c through filter[:, :, c, j]
    w = b.tensor(reshape(b, w, [kh, kw, c * m]))
    w_oihw = reshape(b, permute(b, w, [2, 0, 1]), [c * m, 1, kh, kw])
    return [convolution(e, w_oihw, c)]


@rule("BiasAdd", "BiasAddV1")
def _bias_add(e: TfOp) -> Sequence[Operand]:
    b = e.b
    x, bias = e.node(0), e.node(1)
    rank = len(shape_of(x))
    if e.attr("data_format", "NHWC") == "NCHW" and rank > 2:
        bias = b.tensor(reshape(b, bias, [shape_of(bias)[0]] + [1] * (rank - 2)))
    return [b.call(aten.add.Tensor, x, bias)]


@rule("MatMul")
def _matmul(e: TfOp) -> Sequence[Operand]:
    b = e.b
    x, y = e.node(0), e.node(1)
    if e.attr("transpose_a", False):
        x = b.tensor(permute(b, x, [1, 0]))
    if e.attr("transpose_b", False):
        y = b.tensor(permute(b, y, [1, 0]))
    return [b.call(aten.mm.default, x, y)]


def _last_two_swapped(b: GraphBuilder, x: fx.Node) -> fx.Node:
    r = len(shape_of(x))
    return b.tensor(permute(b, x, [*range(r - 2), r - 1, r - 2]))


@rule("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def _batch_matmul(e: TfOp) -> Sequence[Operand]:
    b = e.b
    x, y = e.node(0), e.node(1)
    if e.attr("adj_x", False):
        x = _last_two_swapped(b, x)
    if e.attr("adj_y", False):
        y = _last_two_swapped(b, y)
    (xs, ys) = shape_of(x), shape_of(y)
    if len(xs) < 2 or len(ys) < 2:
        raise Declined("a batched product of vectors")
    if len(xs) == len(ys) == 2:
        return [b.call(aten.mm.default, x, y)]
    batch = list(np.broadcast_shapes(tuple(xs[:-2]), tuple(ys[:-2])))
    nb = math.prod(batch)
    operands = []
    for t, s in ((x, xs), (y, ys)):
        full = [*batch, *s[-2:]]
        t = b.tensor(reshape(b, t, [1] * (len(full) - len(s)) + list(s)))
        if shape_of(t) != tuple(full):
            t = b.call(aten.expand.default, t, full)
        operands.append(b.tensor(reshape(b, t, [nb, *s[-2:]])))
    prod = b.call(aten.bmm.default, *operands)
    return [reshape(b, prod, e.out.shape)]
