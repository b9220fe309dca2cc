"""Quantized contractions in integers: a convolution or matrix product whose two factors are dequantized
integer tensors (``dequantize(q) = (q - zero) * scale``) is computed as an integer sum, accumulated in
int32, and scaled once per output element.

With ``x = (xq - zx) * sx`` (per tensor) and ``w = (wq - zw[c]) * sw[c]`` (per tensor, or per output
channel ``c``), each output is ``sx * sw[c] * sum_k (xq - zx) * (wq - zw[c])``, and the sum over the
``K`` terms is

    sum_k xq * wq  -  zx * sum_k wq  -  zw[c] * sum_k xq  +  K * zx * zw[c]

so both factors are read as they are stored (uint8 or int8; the CPU then sums them with its integer
dot-product instructions, :mod:`polytri.cpu_codegen.dot_product`): the first sum is the contraction
itself, the second a per-channel sum of the weights (over the weights only), the third a sum of the
activations per output row or pixel (over the activations only: ``1 / channels`` of the contraction's
work), each left out where its zero point is known to be 0.  Padding must contribute nothing, so padded
activations are filled with ``zx`` rather than 0 (and count among the ``K`` terms).  The float result
then follows the op: ``float32(sum) * (sx * sw[c]) + bias[c]``, rounded to the output's dtype.  The sum
is exact; the dequantized float product eager computes rounds at each step, so the two differ by
float32 rounding, far below one quantization step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.fx as fx

from ..pipeline.decisions import Decision
from .torch_args import as_float, as_int, as_ints
from .torch_lower import HANDLERS, SegmentLowering, is_view, op_name
from .torch_values import Index, LoweringError, Val, cast, literal, view_of

I32 = torch.int32
F32 = torch.float32
QD = "quantized_decomposed."


@dataclass(frozen=True)
class Quantized:
    """A factor that is a dequantized integer tensor, possibly through a permutation."""

    q: Val
    """The integers (int8 or uint8): stored, or computed where read (a quantize op's result)."""
    zero: Callable[[Index], str]
    """int32 text of the zero point of element ``idx``."""
    scale: Callable[[Index], str]
    """float32 text of the scale of element ``idx``."""
    zero_value: int | None
    """The zero point when it is one number for the whole tensor."""
    per_tensor: bool = False
    """One scale and zero point for the whole tensor: any view of it is quantized alike."""
    axis: int | None = None
    """The dimension along which a per-channel tensor's scales vary (``None`` per tensor)."""

    def scales_along(self, dim: int) -> bool:
        """Whether the scale varies along ``dim`` at most (a contraction's output channel): the scale of an
        output element is then the factor's scale at that channel."""
        return self.per_tensor or self.axis == dim


def quantized(ctx: SegmentLowering, node: object) -> Quantized | None:
    """The factor ``node`` as integers, if it is a dequantize to float32 (or a permutation of one);
    ``None`` otherwise."""
    if not isinstance(node, fx.Node):
        return None
    if is_view(node) and isinstance(node.args[0], fx.Node):
        return _through_view(ctx, node, node.args[0])
    if node.kwargs.get("out_dtype") not in (None, F32) or not all(_readable(ctx, a) for a in node.all_input_nodes):
        return None
    if op_name(node) == QD + "dequantize_per_tensor.default":
        q, scale, zero = ctx.val(node.args[0]), as_float(node.args[1]), as_int(node.args[2])
        return Quantized(q, lambda idx: literal(zero), lambda idx: literal(scale), zero, per_tensor=True)
    if op_name(node) == QD + "dequantize_per_channel.default":
        return _per_channel(ctx, node)
    return None


def _per_channel(ctx: SegmentLowering, node: fx.Node) -> Quantized | None:
    q, scales = ctx.val(node.args[0]), ctx.val(node.args[1])
    zps = ctx.val(node.args[2]) if isinstance(node.args[2], fx.Node) else None
    axis = as_int(node.args[3]) % q.rank
    if scales.rank != 1 or (zps is not None and zps.rank != 1):
        return None

    def zero(idx: Index) -> str:
        return "0" if zps is None else cast(zps.load((idx[axis],)), zps.dtype, I32)

    def scale(idx: Index) -> str:
        return cast(scales.load((idx[axis],)), scales.dtype, F32)
    return Quantized(q, zero, scale, 0 if zps is None else None, axis=axis)


def _readable(ctx: SegmentLowering, node: fx.Node) -> bool:
    """Whether this segment can read ``node``'s value: lowered in it (or already one of its inputs), or an
    input of the graph.  The integers under a dequantize computed in another segment are not stored."""
    return node in ctx.values or node.op in ("placeholder", "get_attr")


def _through_view(ctx: SegmentLowering, node: fx.Node, source: fx.Node) -> Quantized | None:
    """A view of a quantized factor: any view of one quantized per tensor (the view's own lowering, applied
    to the integers), a permutation of one quantized per channel."""
    inner = quantized(ctx, source)
    if inner is None:
        return None
    if inner.per_tensor:
        saved = ctx.values.get(source)
        ctx.values[source] = inner.q
        try:
            view = HANDLERS[op_name(node)].handler(ctx, node)
        except LoweringError:  # the view of the integers cannot be lowered: the float path may still be
            return None
        finally:
            if saved is None:
                del ctx.values[source]
            else:
                ctx.values[source] = saved
        return Quantized(view, inner.zero, inner.scale, inner.zero_value, per_tensor=True) if isinstance(view, Val) else None
    if op_name(node) == "aten.permute.default":
        return _permuted(inner, as_ints(node.args[1]))
    return _permuted(inner, [1, 0]) if op_name(node) == "aten.t.default" else None


def _permuted(v: Quantized, dims: list[int]) -> Quantized:
    """``v`` through ``permute(dims)``: element ``idx`` of the result is element ``src(idx)`` of ``v``."""
    def src(idx: Index) -> Index:
        return tuple(idx[dims.index(d)] for d in range(len(dims)))
    shape = tuple(v.q.shape[d] for d in dims)
    return Quantized(view_of(v.q, shape, src), lambda idx: v.zero(src(idx)), lambda idx: v.scale(src(idx)),
                     v.zero_value, axis=None if v.axis is None else dims.index(v.axis))


def shifted(w: Quantized) -> Val:
    """``wq - zw`` as int32 (the weight side of the sum, where the weight's zero point stays in it)."""
    if w.zero_value == 0:
        return widened(w.q)
    return Val(w.q.shape, I32, lambda idx: f"({cast(w.q.load(idx), w.q.dtype, I32)} - {w.zero(idx)})", ops=2)


def widened(q: Val) -> Val:
    """The stored integers ``q`` read as int32."""
    return Val(q.shape, I32, lambda idx: cast(q.load(idx), q.dtype, I32), ops=1)


def activation_sums(ctx: SegmentLowering, base: str, x: Val, rows: tuple[str, ...], terms: tuple[str, ...],
                    at: Callable[[Index], Index], row: Callable[[Index], Index]) -> Callable[[Index], str]:
    """An int32 array of the sums of the stored activations ``x`` over ``terms`` for each of ``rows``
    (``at(row..., term...)`` is the index of ``x``); returns the int32 text of the sum for output ``idx``
    (``row(idx)`` is its row)."""
    name = ctx.temp(base, rows, I32)
    ctx.emit(name, rows, lambda it, r: "0")
    ctx.emit(name, (*rows, *terms), lambda it, r: cast(x.load(at(it)), x.dtype, I32), op="+=",
             index=lambda it: it[:len(rows)])
    return lambda idx: f"{name}[{', '.join(row(idx))}]"


def corrections(zx: int, wsum: str | None, asum: Callable[[Index], str] | None, zw: Callable[[Index], str],
                terms: str, channel: Callable[[Index], str]) -> Callable[[Index], str] | None:
    """int32 text to subtract from the sum of stored factors at output ``idx``: ``zx * wsum[c] + zw[c] *
    (asum - K * zx)`` (see the module docstring), without the terms whose zero point is 0; ``None``
    when there is nothing to subtract."""
    def load(idx: Index) -> str:
        parts = [] if wsum is None else [f"{literal(zx)} * {wsum}[{channel(idx)}]"]
        if asum is not None:
            rows = asum(idx) if zx == 0 else f"({asum(idx)} - {terms} * {literal(zx)})"
            parts.append(f"{zw(idx)} * {rows}")
        return " + ".join(parts)
    return load if wsum is not None or asum is not None else None


def weight_sums(ctx: SegmentLowering, base: str, w: Val, channels: str, terms: tuple[str, ...],
                at: Callable[[Index], Index], zero: int) -> str | None:
    """An int32 array of ``channels`` sums of ``w`` over ``terms`` (``at(channel, term...)`` is the index of
    ``w``); returns its name.  ``None`` when the activations' zero point ``zero`` is 0 (no correction)."""
    if zero == 0:
        return None
    name = ctx.temp(base, (channels,), I32)
    ctx.emit(name, (channels,), lambda it, r: "0")
    ctx.emit(name, (channels, *terms), lambda it, r: w.load(at(it)), op="+=", index=lambda it: (it[0],))
    return name


def record(ctx: SegmentLowering, node: fx.Node, x: Quantized, w: Quantized) -> None:
    """File the integer contraction of ``node`` among the segment's decisions (``explain()`` lists it)."""
    kinds = f"{x.q.dtype} x {w.q.dtype}".replace("torch.", "")
    ctx.segment.decisions.append(Decision(
        "lowering", "integer-contraction", node.name,
        f"{node.name}: {kinds} contraction accumulated in int32, scaled to float32 once per output",
        {"activation": str(x.q.dtype), "weight": str(w.q.dtype), "zero_point": x.zero_value}))


def requantized(sums: Val, correction: Callable[[Index], str] | None, scale: Callable[[Index], str],
                bias: Callable[[Index], str] | None) -> Val:
    """The float32 result of integer ``sums``: ``float32(sum - correction) * scale + bias``
    (:func:`corrections`)."""
    def load(idx: Index) -> str:
        total = sums.load(idx) if correction is None else f"({sums.load(idx)} - ({correction(idx)}))"
        value = f"{cast(total, I32, F32)} * {scale(idx)}"
        return f"({value} + {bias(idx)})" if bias is not None else f"({value})"
    return Val(sums.shape, F32, load, ops=sums.ops + 4)
