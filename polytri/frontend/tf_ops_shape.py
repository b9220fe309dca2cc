"""Shape operations of TensorFlow as ATen views and copies: reshapes, transposes, slices, concatenation,
padding, tiling and broadcasting.  Their shapes, axes and bounds must be known while translating (constants,
or computed from static shapes); the output's static shape is TensorFlow's own."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.fx as fx

from .jax_graph import GraphBuilder, Operand, shape_of
from .jax_ops_shape import permute, reshape
from .tf_rules import Declined, TfOp, axis, rule

aten = torch.ops.aten


@rule("Identity", "StopGradient", "PreventGradient", "Snapshot", "EnsureShape", "CheckNumerics")
def _identity(e: TfOp) -> Sequence[Operand]:
    return [e.arg(0)]


@rule("IdentityN")
def _identity_n(e: TfOp) -> Sequence[Operand]:
    return [e.arg(k) for k in range(e.arity)]


@rule("Reshape", "ExpandDims", "Squeeze")
def _reshape(e: TfOp) -> Sequence[Operand]:
    return [reshape(e.b, e.arg(0), e.out.shape)]


@rule("Transpose")
def _transpose(e: TfOp) -> Sequence[Operand]:
    return [permute(e.b, e.node(0), e.ints(1))]


@rule("ZerosLike", "OnesLike")
def _fill_like(e: TfOp) -> Sequence[Operand]:
    value = 0 if e.type == "ZerosLike" else 1
    return [e.b.call(aten.full.default, list(e.out.shape), value, dtype=e.out.dtype)]


def broadcast(b: GraphBuilder, x: fx.Node, shape: Sequence[int]) -> Operand:
    """``x`` broadcast (numpy's rules) to ``shape``."""
    s = shape_of(x)
    y = b.tensor(reshape(b, x, [1] * (len(shape) - len(s)) + list(s)))
    return y if shape_of(y) == tuple(shape) else b.call(aten.expand.default, y, list(shape))


@rule("BroadcastTo")
def _broadcast_to(e: TfOp) -> Sequence[Operand]:
    return [broadcast(e.b, e.node(0), e.out.shape)]


@rule("Fill")
def _fill(e: TfOp) -> Sequence[Operand]:
    return [broadcast(e.b, e.node(1), e.out.shape)]


@rule("Tile")
def _tile(e: TfOp) -> Sequence[Operand]:
    x = e.node(0)
    reps = e.ints(1)
    if all(r == 1 or s == 1 for s, r in zip(shape_of(x), reps)):  # only dimensions of 1 repeat: a view
        return [broadcast(e.b, x, e.out.shape)]
    return [e.b.call(aten.repeat.default, x, reps)]


@rule("Pad", "PadV2")
def _pad(e: TfOp) -> Sequence[Operand]:
    pairs = e.static(1).reshape(-1, 2).tolist()
    if any(int(p) < 0 for pair in pairs for p in pair):
        raise Declined("negative padding")
    value = float(e.static(2).reshape(())) if e.type == "PadV2" else 0.0
    if not e.out.dtype.is_floating_point:
        value = int(value)
    flat = [int(p) for pair in reversed(pairs) for p in pair]  # the last dimension first
    if not any(flat):
        return [e.arg(0)]
    return [e.b.call(aten.constant_pad_nd.default, e.node(0), flat, value)]


@rule("ConcatV2")
def _concat(e: TfOp) -> Sequence[Operand]:
    n = e.arity - 1
    dim = axis(e.ints(n)[0], len(e.out.shape))
    parts = [e.node(k) for k in range(n)]
    return [parts[0] if n == 1 else e.b.call(aten.cat.default, parts, dim)]


@rule("Pack")
def _pack(e: TfOp) -> Sequence[Operand]:
    dim = axis(int(e.attr("axis", 0)), len(e.out.shape))
    parts = []
    for k in range(e.arity):
        x = e.node(k)
        s = list(shape_of(x))
        parts.append(e.b.tensor(reshape(e.b, x, s[:dim] + [1] + s[dim:])))
    return [e.b.call(aten.cat.default, parts, dim)]


def _slices(b: GraphBuilder, x: fx.Node, d: int, bounds: Sequence[tuple[int, int]]) -> list[Operand]:
    return [b.call(aten.slice.Tensor, x, d, lo, hi, 1) for lo, hi in bounds]


@rule("Unpack")
def _unpack(e: TfOp) -> Sequence[Operand]:
    x = e.node(0)
    d = axis(int(e.attr("axis", 0)), len(shape_of(x)))
    parts = _slices(e.b, x, d, [(k, k + 1) for k in range(shape_of(x)[d])])
    return [reshape(e.b, p, o.shape) for p, o in zip(parts, e.outs)]


@rule("Split", "SplitV")
def _split(e: TfOp) -> Sequence[Operand]:
    if e.type == "Split":
        x = e.node(1)
        d = axis(e.ints(0)[0], len(shape_of(x)))
    else:
        x = e.node(0)
        d = axis(e.ints(2)[0], len(shape_of(x)))
    sizes = [o.shape[d] for o in e.outs]
    starts = [sum(sizes[:k]) for k in range(len(sizes))]
    return _slices(e.b, x, d, [(s, s + n) for s, n in zip(starts, sizes)])


@rule("Slice")
def _slice(e: TfOp) -> Sequence[Operand]:
    y: Operand = e.node(0)
    shape = e.shape(0)
    for d, (lo, n) in enumerate(zip(e.ints(1), e.ints(2))):
        hi = shape[d] if n == -1 else lo + n
        if (lo, hi) != (0, shape[d]):
            y = e.b.call(aten.slice.Tensor, y, d, lo, hi, 1)
    return [y]


def _bit(mask: int, i: int) -> bool:
    return bool(mask >> i & 1)


def _entry(shape: Sequence[int], d: int, begin: int, end: int, stride: int, masks: tuple[int, int, int],
           i: int) -> tuple[int, int, int]:
    """(start, stop, step) along dimension ``d`` of the ``i``-th entry of a strided slice's spec."""
    n = shape[d]
    begin_mask, end_mask, shrink = masks
    if _bit(shrink, i):
        lo = begin + n if begin < 0 else begin
        return lo, lo + 1, 1
    if stride <= 0:
        raise Declined("a strided slice with a negative stride")
    lo = 0 if _bit(begin_mask, i) else min(max(begin + n if begin < 0 else begin, 0), n)
    hi = n if _bit(end_mask, i) else min(max(end + n if end < 0 else end, 0), n)
    return lo, max(hi, lo), stride


@rule("StridedSlice")
def _strided_slice(e: TfOp) -> Sequence[Operand]:
    x = e.node(0)
    shape = shape_of(x)
    begin, end, strides = e.ints(1), e.ints(2), e.ints(3)
    ellipsis, new_axis = int(e.attr("ellipsis_mask", 0)), int(e.attr("new_axis_mask", 0))
    masks = (int(e.attr("begin_mask", 0)), int(e.attr("end_mask", 0)), int(e.attr("shrink_axis_mask", 0)))
    y: Operand = x
    d = 0
    for i in range(len(begin)):
        if _bit(ellipsis, i):  # the dimensions the other entries leave
            rest = sum(1 for j in range(i + 1, len(begin)) if not _bit(new_axis, j))
            d = len(shape) - rest
            continue
        if _bit(new_axis, i):  # a dimension of 1 in the output (the final reshape makes it)
            continue
        lo, hi, step = _entry(shape, d, begin[i], end[i], strides[i], masks, i)
        if (lo, hi, step) != (0, shape[d], 1):
            y = e.b.call(aten.slice.Tensor, y, d, lo, hi, step)
        d += 1
    return [reshape(e.b, y, e.out.shape)]
