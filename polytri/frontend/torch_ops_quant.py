"""Quantize and dequantize (the ``quantized_decomposed`` ops of PyTorch 2 export quantization): elementwise,
with the arithmetic, roundings and clamping the ops define, so a quantized graph runs in polytri's kernels.

- ``quantize_per_tensor(x, scale, zp, qmin, qmax, dtype)`` is
  ``dtype(clamp(round(float32(x) * (1 / scale)) + zp, qmin, qmax))``: the product in float32 (the inverse
  scale rounded to float32, as a Python number meeting a float32 tensor is), ``round`` to nearest even;
- ``dequantize_per_tensor(q, scale, zp, ...)`` is ``(float32(q) - zp) * scale`` in float32;
- ``dequantize_per_channel(q, scales, zps, axis, ...)`` is ``(int64(q) - zps[c]) * scales[c]``, computed
  in the scales' type and converted to float32, ``c`` the index along ``axis``;
- ``quantize_per_channel(x, scales, zps, axis, ...)`` rounds ``x * (1 / scales[c])`` (the inverse in the
  scales' type) and adds ``zps[c]`` before clamping.

The contractions of a quantized graph (a convolution or linear layer reading dequantized values) are
handled by :mod:`.torch_quant_contraction`, in integers.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from .torch_args import as_float, as_int
from .torch_lower import SegmentLowering, register
from .torch_values import Index, LoweringError, Val, broadcast, cast, literal

F32 = torch.float32


def _qrange(node: fx.Node, first: int) -> tuple[int, int]:
    return as_int(node.args[first]), as_int(node.args[first + 1])


def _out_float32(node: fx.Node) -> None:
    if node.kwargs.get("out_dtype") not in (None, F32):
        raise LoweringError(f"dequantize to {node.kwargs['out_dtype']} runs in eager")


def _float_input(ctx: SegmentLowering, node: fx.Node) -> Val:
    x = ctx.val(node)
    if x.dtype not in (F32, torch.float16, torch.bfloat16):
        raise LoweringError(f"quantizing {x.dtype} values runs in eager")
    return x


def _clamped(value: str, qmin: int, qmax: int, dtype: torch.dtype) -> str:
    return cast(f"min(max({value}, {literal(qmin)}), {literal(qmax)})", F32, dtype)


@register("quantized_decomposed.quantize_per_tensor.default", kind="pointwise")
def _quantize_per_tensor(ctx: SegmentLowering, node: fx.Node) -> Val:
    shape, out = ctx.out(node)
    x = _float_input(ctx, node.args[0])  # type: ignore[arg-type]
    inv, zp = 1.0 / as_float(node.args[1]), as_int(node.args[2])
    qmin, qmax = _qrange(node, 3)

    def load(idx: Index) -> str:
        return _clamped(f"round({cast(x.load(idx), x.dtype, F32)} * {literal(inv)}) + {literal(zp)}", qmin, qmax, out)
    return Val(shape, out, load, ops=x.ops + 5)


@register("quantized_decomposed.dequantize_per_tensor.default", kind="pointwise")
def _dequantize_per_tensor(ctx: SegmentLowering, node: fx.Node) -> Val:
    _out_float32(node)
    shape, _ = ctx.out(node)
    q = ctx.val(node.args[0])
    scale, zp = as_float(node.args[1]), as_int(node.args[2])

    def load(idx: Index) -> str:
        return f"(({cast(q.load(idx), q.dtype, F32)} - {literal(zp)}) * {literal(scale)})"
    return Val(shape, F32, load, ops=q.ops + 3)


def _per_channel(ctx: SegmentLowering, node: fx.Node) -> tuple[Val, Val, Val | None, int]:
    """The operand, the scales and zero points (``None`` if absent) and the axis of a per-channel op."""
    x = ctx.val(node.args[0])
    scales = ctx.val(node.args[1])
    zps = ctx.val(node.args[2]) if isinstance(node.args[2], fx.Node) else None
    axis = as_int(node.args[3]) % max(x.rank, 1)
    if scales.rank != 1 or (zps is not None and zps.rank != 1) or not scales.dtype.is_floating_point:
        raise LoweringError("per-channel parameters that are not vectors of floats run in eager")
    return x, scales, zps, axis


@register("quantized_decomposed.dequantize_per_channel.default", kind="pointwise")
def _dequantize_per_channel(ctx: SegmentLowering, node: fx.Node) -> Val:
    _out_float32(node)
    shape, _ = ctx.out(node)
    q, scales, zps, axis = _per_channel(ctx, node)
    comp = scales.dtype
    channel = broadcast(scales, (shape[axis],))

    def load(idx: Index) -> str:
        c = (idx[axis],)
        shifted = cast(q.load(idx), q.dtype, torch.int64)
        if zps is not None:
            shifted = f"({shifted} - {cast(broadcast(zps, (shape[axis],))(c), zps.dtype, torch.int64)})"
        return cast(f"({cast(shifted, torch.int64, comp)} * {channel(c)})", comp, F32)
    return Val(shape, F32, load, ops=q.ops + 4)


@register("quantized_decomposed.quantize_per_channel.default", kind="pointwise")
def _quantize_per_channel(ctx: SegmentLowering, node: fx.Node) -> Val:
    shape, out = ctx.out(node)
    x, scales, zps, axis = _per_channel(ctx, node)
    if zps is None:
        raise LoweringError("quantize_per_channel without zero points runs in eager")
    qmin, qmax = _qrange(node, 4)
    comp = torch.promote_types(F32, scales.dtype)
    inv = broadcast(scales, (shape[axis],))
    zp = broadcast(zps, (shape[axis],))

    def load(idx: Index) -> str:
        c = (idx[axis],)
        product = f"round({cast(x.load(idx), x.dtype, comp)} * (1 / {cast(inv(c), scales.dtype, comp)}))"
        return _clamped(cast(f"({product} + {cast(zp(c), zps.dtype, comp)})", comp, F32), qmin, qmax, out)
    return Val(shape, out, load, ops=x.ops + 6)
