"""Layers of convolutional networks besides the convolution: batch norm in inference and max pooling.

Batch norm in inference is an elementwise scale and shift per channel.  The scale and shift are computed
once per channel (two short statements) and the normalized value is read where it is used, so it lands
in the statement of its consumer: the convolution's output is scaled, shifted and activated in one pass.

Max pooling is a reduction over the window with a guard for the padding; only the values are lowered
(the indices are rarely used in inference, and a node that needs them runs in eager).
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from .torch_args import as_float, as_int, as_ints
from .torch_conv_borders import inside, window_at
from .torch_lower import SegmentLowering, register
from .torch_ops_pointwise import nan_max
from .torch_values import Index, LoweringError, Val, acc_dtype, array_val, cast, literal, rounded


def _results_used(ctx: SegmentLowering, node: fx.Node) -> set[int]:
    """The positions of a tuple-valued node's results that some node reads."""
    used = set()
    for user in ctx.users.get(node, []):
        if user.target is not operator.getitem:
            raise LoweringError(f"{node.name}'s results are used as a tuple")
        used.add(as_int(user.args[1]))
    return used


@register("aten._native_batch_norm_legit_no_training.default", kind="pointwise")
def _batch_norm(ctx: SegmentLowering, node: fx.Node) -> tuple[Val, None, None]:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` along dimension 1, computed as ``x * alpha + beta``
    with ``alpha = weight / sqrt(var + eps)`` and ``beta = bias - mean * alpha`` per channel, in the
    accumulation type (equal to eager within float32 rounding, not bit for bit)."""
    if _results_used(ctx, node) - {0}:
        raise LoweringError("batch norm's saved statistics are used: it runs in eager")
    x_node, w_node, b_node, mean_node, var_node = node.args[:5]
    eps = as_float(node.args[6])
    x = ctx.val(x_node)
    shape, out = ctx.out(node, 0)
    if not out.is_floating_point or x.rank < 2:
        raise LoweringError("batch norm of this input runs in eager")
    acc = acc_dtype(out)
    chans = (shape[1],)

    def per_channel(arg: object) -> str | None:
        if not isinstance(arg, fx.Node):
            return None
        v = ctx.val(arg)
        return cast(v.load(("i0",) if v.rank else ()), v.dtype, acc)
    w, b, mean, var = (per_channel(a) for a in (w_node, b_node, mean_node, var_node))
    if mean is None or var is None:
        raise LoweringError("batch norm without running statistics runs in eager")
    alpha = ctx.temp(node.name + "_alpha", chans, acc)
    beta = ctx.temp(node.name + "_beta", chans, acc)
    # the emitted statements range over ``i0``, the channel: per_channel's texts are written in it
    scale = f"1 / sqrt({var} + {literal(eps)})"
    ctx.emit(alpha, chans, lambda it, r: f"{scale} * {w}" if w is not None else scale)
    ctx.emit(beta, chans, lambda it, r: f"{b} - {mean} * {alpha}[i0]" if b is not None else f"-({mean} * {alpha}[i0])")

    def load(idx: Index) -> str:
        return f"({cast(x.load(idx), x.dtype, acc)} * {alpha}[{idx[1]}] + {beta}[{idx[1]}])"
    return rounded(Val(shape, acc, load, ops=x.ops + 2), out), None, None


@register("aten.max_pool2d_with_indices.default", kind="reduce")
def _max_pool2d(ctx: SegmentLowering, node: fx.Node) -> tuple[Val, None]:
    """The maximum of each window (NaN if the window holds one, as in ATen); padding never wins."""
    if _results_used(ctx, node) - {0}:
        raise LoweringError("max pooling's indices are used: it runs in eager")
    args = list(node.args) + [None] * (6 - len(node.args))
    kernel = _pair(args[1])
    stride = _pair(args[2]) if args[2] else kernel
    padding, dilation = _pair(args[3] if args[3] is not None else 0), _pair(args[4] if args[4] is not None else 1)
    shape, out = ctx.out(node, 0)
    if not out.is_floating_point:
        raise LoweringError("max pooling of integers runs in eager")
    x = ctx.readable(ctx.val(args[0]), node.name + "_x")
    lead = x.rank - 2
    height, width = x.shape[lead], x.shape[lead + 1]
    name = ctx.temp(node.name, shape, out)
    lowest = cast(literal(float("-inf")), torch.float64, out)
    ctx.emit(name, shape, lambda it, r: lowest)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation

    def window(it: Index) -> tuple[str, str]:  # it: (leading dims..., ky, kx, y, x)
        return window_at(sh, it[lead + 2], dh, it[lead], ph), window_at(sw, it[lead + 3], dw, it[lead + 1], pw)

    def index(it: Index) -> Index:
        return it[:lead] + it[lead + 2:]
    # padding and ceil_mode put windows partly outside the input (the domain drops the redundant bounds)
    guard = inside(*window(tuple(f"i{d}" for d in range(lead + 4))), height, width)

    def rhs(it: Index, r: Index) -> str:
        wy, wx = window(it)
        return nan_max(f"{name}[{', '.join(index(it))}]", x.load(it[:lead] + (wy, wx)))
    # loops (leading dims, ky, kx, y, x): the output row is read and written along x, the input strided
    ctx.emit(name, (*shape[:lead], str(kh), str(kw), *shape[lead:]), rhs, op="=", guard=guard, index=index)
    return array_val(name, shape, out), None


def _pair(arg: object) -> tuple[int, int]:
    """A 2-D size argument (one int, or a list of one or two)."""
    if isinstance(arg, int):
        return arg, arg
    items = as_ints(arg)  # type: ignore[arg-type]
    if len(items) == 1:
        return items[0], items[0]
    if len(items) != 2:
        raise LoweringError(f"expected one or two sizes, got {arg!r}")
    return items[0], items[1]
