"""2-D convolution (stride, padding, dilation, groups) and how each is computed (:data:`CONV_FORMS`).

A convolution whose reduction (input channels of a group x kernel window) is small and static is written
as one statement with the window unrolled: no accumulation loop, every output element written once (the
separable blur's case); a padded depthwise one the same way on a zero-padded copy of its input.  On the
CPU only depthwise ones are unrolled: a dense one reuses each input element across output channels,
which the implicit GEMM's register blocks exploit.  Larger
ones are an implicit GEMM over flattened pixels or a nest over rows.  Convolutions of 16-bit floats
accumulate in float32 (:func:`.acc_dtype`), bias included, and are rounded once at the op's output, as
oneDNN does; a convolution of dequantized operands is an integer contraction
(:mod:`.torch_quant_contraction`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.fx as fx

from ..cpu_codegen.blocking import blocking
from ..dtypes import dtype as pt_type
from ..pipeline.decisions import Decision
from .torch_args import as_int, as_ints, fake
from .torch_conv_borders import ConvGeometry, inside, pad_around, pad_rows, pad_windows, plus_size, window_at
from .torch_lower import SegmentLowering, register
from .torch_quant_contraction import (
    corrections,
    quantized,
    record,
    requantized,
    shifted,
    weight_sums,
    widened,
)
from .torch_values import (
    Index,
    LoweringError,
    Val,
    acc_dtype,
    array_val,
    broadcast,
    cast,
    literal,
    pt_dtype,
    rounded,
)

#: Convolutions with at most this many terms per output element are unrolled into one statement.
MAX_UNROLLED_TERMS = 32
#: An unrolled convolution recomputes an elementwise or unrolled input inside its own statement (instead of
#: storing it) while the operations per output element stay within this budget, and so do the operations
#: spent on each input element over all its reads (output channels of its group times window points): a
#: 1x1 convolution 24 -> 96 whose input was a batch norm plus a residual add recomputed them 96 times.
MAX_RECOMPUTE_OPS = 160


@dataclass(frozen=True)
class _Conv:
    """A 2-D convolution's static description: weight window, groups, stride, padding, dilation."""

    cin_g: int
    kh: int
    kw: int
    cout: int
    groups: int
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]

    @property
    def padded(self) -> bool:
        return bool(self.padding[0] or self.padding[1])

    @property
    def terms(self) -> int:
        return self.cin_g * self.kh * self.kw


def _conv_of(node: fx.Node) -> _Conv:
    """The static description of an ``aten.convolution`` node; :class:`LoweringError` where it is not
    static or not 2-D."""
    w_node, stride_arg, padding_arg, dilation_arg, transposed, _, groups = node.args[1], *node.args[3:9]
    if transposed:
        raise LoweringError("transposed convolutions run in eager")
    dims = fake(w_node).shape
    if len(dims) != 4 or any(isinstance(s, torch.SymInt) for s in dims):
        raise LoweringError("convolutions with dynamic weight shapes run in eager")
    cout, cin_g, kh, kw = (int(s) for s in dims)
    stride, padding, dilation = as_ints(stride_arg), as_ints(padding_arg), as_ints(dilation_arg)
    return _Conv(cin_g, kh, kw, cout, as_int(groups), (stride[0], stride[1]), (padding[0], padding[1]),
                 (dilation[0], dilation[1]))


@register("aten.convolution.default", kind="reuse")
def _convolution(ctx: SegmentLowering, node: fx.Node) -> Val:
    shape, out = ctx.out(node)
    if len(shape) != 4 or not out.is_floating_point:
        raise LoweringError("only 2-D floating-point convolutions are lowered")
    conv = _conv_of(node)
    x, w = ctx.val(node.args[0]), ctx.val(node.args[1])
    b_node = node.args[2]
    bias = ctx.val(b_node) if isinstance(b_node, fx.Node) else None
    integer = _quantized_convolution(ctx, node, conv, bias)
    if integer is not None:
        return rounded(integer, out)
    acc = acc_dtype(out)
    bl = broadcast(bias, (shape[1],)) if bias is not None else None
    start = (lambda it: cast(bl((it[1],)), bias.dtype, acc)) if bl is not None and bias is not None else (lambda it: "0")
    sums = _conv_sums(ctx, node, conv, x, w, acc, start,
                      start_ops=bias.ops if bias is not None else 0)
    return rounded(sums, out)


def _conv_sums(ctx: SegmentLowering, node: fx.Node, conv: _Conv, x: Val, w: Val, acc: torch.dtype,
               start: Callable[[Index], str], pad: str = "0", start_ops: int = 0,
               shape: tuple[str, ...] | None = None, base: str | None = None, report: bool = True) -> Val:
    """The convolution's sums in ``acc``, each started at ``start(it)``: unrolled into one statement when
    the window is small and unpadded (on the CPU, depthwise only), as an implicit GEMM when rows would leave the register blocks
    emptier than :data:`ROW_BLOCK_USE` (padding filled with ``pad``), else as a nest over rows.  The
    factors are read as ``acc``.  ``shape`` and ``base`` (the output's shape and the arrays' names) are
    the node's unless given; ``report`` files the form among the segment's decisions."""
    shape = shape or ctx.out(node)[0]
    base = base or node.name
    form = _conv_form(ctx, conv, pad, shape, x, acc)
    if report:
        _record_form(ctx, node, conv, form)
    if form == "padded-unrolled":
        if conv.stride != (1, 1):
            ctx.start_program_here(node)
        x, conv = _zero_padded(ctx, base, x, conv), replace(conv, padding=(0, 0))
    unroll = form.endswith("unrolled")
    reads = conv.cout // conv.groups * conv.kh * conv.kw  # of each input element
    if not (unroll and x.ops * conv.terms <= MAX_RECOMPUTE_OPS and x.ops * reads <= MAX_RECOMPUTE_OPS):
        x = ctx.readable(x, base + "_x")
    w = ctx.readable(w, base + "_w")
    cout_g = conv.cout // conv.groups
    (sh, sw), (ph, pw), (dh, dw) = conv.stride, conv.padding, conv.dilation
    height, width = x.shape[2], x.shape[3]

    def coords(it: Index, ci: str, ky: str, kx: str) -> tuple[Index, str, str]:
        y, xx = window_at(sh, it[2], dh, ky, ph), window_at(sw, it[3], dw, kx, pw)
        return (it[0], input_channel(it[1], ci, conv.cin_g, cout_g, conv.groups), y, xx), y, xx

    def term(it: Index, ci: str, ky: str, kx: str) -> str:
        idx, _, _ = coords(it, ci, ky, kx)
        return f"{cast(x.load(idx), x.dtype, acc)} * {cast(w.load((it[1], ci, ky, kx)), w.dtype, acc)}"

    if unroll:
        def unrolled(it: Index) -> str:
            parts = [term(it, str(c), str(a), str(b)) for c in range(conv.cin_g) for a in range(conv.kh)
                     for b in range(conv.kw)]
            first = start(it)
            return f"({' + '.join(parts)})" if first == "0" else f"({first} + {' + '.join(parts)})"
        # computed where it is read (the consumer stores it, or recomputes it if cheap enough)
        return Val(shape, acc, unrolled, ops=2 * conv.terms + x.ops * conv.terms + start_ops)
    if form == "implicit-gemm":
        geometry = ConvGeometry(int(height), int(width), int(shape[2]), int(shape[3]), conv.kh, conv.kw, sh, sw, ph,
                             pw, dh, dw)
        return _implicit_gemm(ctx, base, x, w, shape, acc, geometry, conv.cin_g, cout_g, start, pad)
    guard = inside(*coords(("i0", "i1", "i5", "i6"), "i2", "i3", "i4")[1:], height, width) if conv.padded else []
    return _row_nest(ctx, base, shape, acc, (conv.cin_g, conv.kh, conv.kw), term, start, guard)


#: How :func:`_conv_sums` computes a convolution, as :func:`_record_form` explains it.
CONV_FORMS = {
    "unrolled": "one statement of {terms} products per output element (small, unpadded window)",
    "padded-unrolled": "a zero-padded copy of the input, then one statement of {terms} products per output "
                       "element (depthwise: no reuse for register blocks)",
    "implicit-gemm": "an implicit GEMM over the flattened pixels, on the packed micro-kernel",
    "rows": "a multiply-accumulate nest over output rows",
}


def _conv_form(ctx: SegmentLowering, conv: _Conv, pad: str, shape: tuple[str, ...], x: Val,
               acc: torch.dtype) -> str:
    """The key of :data:`CONV_FORMS` that computes ``conv``."""
    if _pads_then_unrolls(ctx, conv, pad):
        return "padded-unrolled"
    if conv.terms <= MAX_UNROLLED_TERMS and not conv.padded and not _dense_on_cpu(ctx, conv):
        return "unrolled"
    return "implicit-gemm" if pad != "0" or conv.stride[1] != 1 or _flattened(ctx, shape, x, acc) else "rows"


def _dense_on_cpu(ctx: SegmentLowering, conv: _Conv) -> bool:
    """Whether a small unpadded convolution with more than one output channel per group runs as the
    implicit GEMM rather than unrolled, on the CPU: unrolled, each output channel reads every input
    element of its window again (and converts a 16-bit one to float32 again), one multiply-add per load;
    the GEMM packs the input once and runs on the micro-kernel's register blocks.  MobileNetV3's 1x1
    convolutions (16 to 24 input channels): in bfloat16 the model went 8.10 -> 7.09 ms a call on one
    thread; in float32, a 1x1 convolution 24 -> 96 on 28x28 pixels with batch norm and hardswish took
    0.124 ms unrolled and 0.071 as the GEMM (eager 0.070), 16 -> 64 on 112x112 0.55 and 0.38 ms, and the
    model 1.10-1.15 -> 0.98-1.03 ms (Inductor 1.05-1.09; one thread, in one process, load 0.56 -> 0.90;
    under ``POLYTRI_MAX_ISA=avx2`` 1.09-1.10 -> 1.05-1.09 ms).  A depthwise convolution (one output
    channel per group) has no such reuse and stays unrolled."""
    return conv.cout // conv.groups > 1 and not ctx.on_gpu()


def _record_form(ctx: SegmentLowering, node: fx.Node, conv: _Conv, form: str) -> None:
    """File how ``node`` is computed among the segment's decisions (``explain()`` lists it)."""
    what = CONV_FORMS[form].format(terms=conv.terms)
    ctx.segment.decisions.append(Decision(
        "lowering", "convolution", node.name, f"{node.name}: computed as {what}",
        {"form": form, "terms": conv.terms, "groups": conv.groups, "stride": conv.stride,
         "padding": conv.padding}))


def _pads_then_unrolls(ctx: SegmentLowering, conv: _Conv, pad: str) -> bool:
    """Whether a padded convolution is computed on a zero-padded copy of its input by one unrolled
    statement: on the CPU, for a small window (:data:`MAX_UNROLLED_TERMS`) where each input channel feeds a
    single output channel (a depthwise convolution).  Such a convolution has no reuse for a product's
    register blocks (the implicit GEMM's rows are one channel, and its im2col copy writes every input
    element once per window point); a copy of the input with zero borders lets the unpadded rule apply:
    each output element is one statement of ``kh x kw`` products that vectorizes along the row, with the
    bias, batch norm and activation in the same statement.  On GPUs the guards of the padding are masks,
    not branches: the copy would only add a pass.

    With a stride, the statement reads the copy at ``2 * y + ky`` for every ``ky``: a union of
    dependences that is no function of the reading iteration.  Fused with a 1x1 convolution before it
    (MobileNet's expand, then a depthwise 5x5 of stride 2), the scheduler's first hyperplane problem did
    not finish in minutes, so such a convolution begins a program of its own
    (:meth:`.SegmentLowering.start_program_here`)."""
    cout_g = conv.cout // conv.groups
    return (conv.padded and conv.groups > 1 and cout_g == 1 and pad == "0" and conv.terms <= MAX_UNROLLED_TERMS
            and not ctx.on_gpu())


def _zero_padded(ctx: SegmentLowering, base: str, x: Val, conv: _Conv) -> Val:
    """``x`` copied into an array with ``conv.padding`` zeros around each image."""
    (ph, pw), (n, c, h, w) = conv.padding, x.shape
    shape = (n, c, plus_size(h, 2 * ph), plus_size(w, 2 * pw))
    name = ctx.temp(base + "_padded", shape, x.dtype)
    pad_around(ctx, name, n, c, h, w, ph, pw)
    ctx.emit(name, x.shape, lambda it, r: x.load(it),
             index=lambda it: (it[0], it[1], f"{it[2]} + {ph}", f"{it[3]} + {pw}"))
    return array_val(name, shape, x.dtype)


def _quantized_convolution(ctx: SegmentLowering, node: fx.Node, conv: _Conv, bias: Val | None) -> Val | None:
    """The convolution of a dequantized activation (per tensor) and weight in integers
    (:mod:`.torch_quant_contraction`), on the CPU with static sizes; ``None`` where it does not apply."""
    x, w = quantized(ctx, node.args[0]), quantized(ctx, node.args[1])
    shape = ctx.out(node)[0]
    static = all(str(e).isdigit() for e in shape) and x is not None and all(str(e).isdigit() for e in x.q.shape)
    if (x is None or w is None or x.zero_value is None or not x.per_tensor or not w.scales_along(0)
            or ctx.on_gpu() or not static):
        return None
    # the weights' zero points stay in the weights (read as int32) where the activations' window sums
    # would be per group; elsewhere the weights are read as stored, corrected by those sums
    in_weights = w.zero_value != 0 and conv.groups != 1
    wq = shifted(w) if in_weights else w.q
    wsum = weight_sums(ctx, node.name + "_wsum", shifted(w) if in_weights else widened(w.q), str(conv.cout),
                       (str(conv.cin_g), str(conv.kh), str(conv.kw)), lambda it: it, x.zero_value)
    with_asum = not in_weights and w.zero_value != 0
    xq = ctx.readable(x.q, node.name + "_x") if with_asum else x.q  # read by both sums: computed once
    asum = _window_sums(ctx, node, conv, xq, x.zero_value) if with_asum else None
    sums = _conv_sums(ctx, node, conv, xq, wq, torch.int32, lambda it: "0", literal(x.zero_value))
    record(ctx, node, x, w)
    bl = broadcast(bias, (shape[1],)) if bias is not None else None
    zw = (lambda idx: "0") if in_weights else (lambda idx: w.zero((idx[1], "0", "0", "0")))
    return requantized(sums, corrections(x.zero_value, wsum, asum, zw, str(conv.terms), lambda idx: idx[1]),
                       lambda idx: f"({x.scale(idx)} * {w.scale((idx[1], '0', '0', '0'))})",
                       (lambda idx: cast(bl((idx[1],)), bias.dtype, torch.float32))
                       if bl is not None and bias is not None else None)


def _window_sums(ctx: SegmentLowering, node: fx.Node, conv: _Conv, xq: Val, zero: int) -> Callable[[Index], str]:
    """The sums of the stored activations ``xq`` (one group) over each output pixel's window, the padding
    read as the zero point ``zero``, in int32: first over the channels at each pixel (the loop along
    rows innermost), then over the window of that one channel, as a convolution of ones (padding
    ``channels * zero``); the int32 text of the sum for output ``idx``."""
    n, c, h, w = xq.shape
    out_n, _, ho, wo = ctx.out(node)[0]
    channels = ctx.temp(node.name + "_csum", (n, "1", h, w), torch.int32)
    ctx.emit(channels, (n, "1", h, w), lambda it, r: "0")
    ctx.emit(channels, (n, c, h, w), lambda it, r: cast(xq.load(it), xq.dtype, torch.int32), op="+=",
             index=lambda it: (it[0], "0", it[2], it[3]))
    ones = Val(("1", "1", str(conv.kh), str(conv.kw)), torch.int32, lambda idx: "1")
    sums = _conv_sums(ctx, node, replace(conv, cin_g=1, cout=1), array_val(channels, (n, "1", h, w), torch.int32),
                      ones, torch.int32, lambda it: "0", literal(conv.cin_g * zero), shape=(out_n, "1", ho, wo),
                      base=node.name + "_asum", report=False)
    return lambda idx: sums.load((idx[0], "0", idx[2], idx[3]))


def input_channel(co: str, ci: str, cin_g: int, cout_g: int, groups: int) -> str:
    """The input channel that output channel ``co`` reads as its ``ci``-th (its group's ``ci``-th); affine
    without groups and for one output channel per group (a depthwise convolution)."""
    if groups == 1:
        return ci
    return f"{cin_g} * {co} + {ci}" if cout_g == 1 else f"({co} // {cout_g}) * {cin_g} + {ci}"


def _row_nest(ctx: SegmentLowering, base: str, shape: tuple[str, ...], acc: torch.dtype,
              window: tuple[int, int, int], term: Callable[[Index, str, str, str], str],
              start: Callable[[Index], str], guard: list[str]) -> Val:
    """The convolution as one multiply-accumulate statement over (n, co, ci, ky, kx, y, x), the padding as
    a guard: the weight is invariant in the inner loops and x runs along rows of input and output."""
    name = ctx.temp(base, shape, acc)
    ctx.emit(name, shape, lambda it, r: start(it))
    cin_g, kh, kw = window
    loops = (shape[0], shape[1], str(cin_g), str(kh), str(kw), shape[2], shape[3])
    ctx.emit(name, loops, lambda it, r: term((it[0], it[1], it[5], it[6]), it[2], it[3], it[4]), op="+=",
             guard=guard, index=lambda it: (it[0], it[1], it[5], it[6]))
    return array_val(name, shape, acc)


#: A convolution whose output rows fill at least this share of the packed micro-kernel's register blocks
#: keeps its loops over rows and columns (and its bias and activation run on each block as its sums
#: complete); below it, the pixels are flattened (:func:`_implicit_gemm`).  So is every convolution with a
#: stride along the width: the packed contraction takes the row form's columns only where consecutive
#: output pixels read consecutive input pixels.  MobileNetV3's first convolution (3 -> 16 channels, 3x3,
#: stride 2, 112 output columns) filled 6 x 16 blocks whole under ``POLYTRI_MAX_ISA=avx2`` and ran as a
#: plain multiply-accumulate nest; flattened, it runs on the micro-kernel as it does with AVX-512.
ROW_BLOCK_USE = 0.9


def _flattened(ctx: SegmentLowering, shape: tuple[str, ...], x: Val, dtype: torch.dtype) -> bool:
    """Whether a convolution is computed as an implicit GEMM over flattened pixels (:func:`_implicit_gemm`):
    on the CPU, for static image sizes, when rows of the output would leave the register blocks of the
    packed contraction (``nr`` columns) emptier than :data:`ROW_BLOCK_USE`."""
    if ctx.on_gpu() or not all(str(e).isdigit() for e in (*shape[2:], *x.shape[2:])):
        return False
    nr = blocking(pt_type(pt_dtype(acc_dtype(dtype)))).nr
    width = int(shape[3])
    return width / (nr * -(-width // nr)) < ROW_BLOCK_USE


def _implicit_gemm(ctx: SegmentLowering, base: str, x: Val, w: Val, shape: tuple[str, ...], acc: torch.dtype,
                   geo: ConvGeometry, cin_g: int, cout_g: int, start: Callable[[Index], str], pad: str = "0") -> Val:
    """The convolution as a product whose columns are the pixels of an image, one iterator ``p``: the CPU's
    packed contraction then fills its 64-column register blocks with whole images, not one row (a
    28-pixel row used 28 of 64 columns of every block, an edge block each time).

    The subscripts stay affine in ``p`` (``y = p // W`` would give the dependences integer divisions, whose
    Farkas sets took the scheduler seconds each):

    - stride 1: the input is copied, zero-padded, into rows of ``row`` elements, flattened; the output is
      computed on a grid of ``row`` columns (a few beyond its width, computed and never read), so that
      pixel ``p = row * y + x`` reads ``xp[n, c, p + dh * row * ky + dw * kx]``;
    - a stride: the windows are copied out (im2col): ``col[n, c, ky, kx, wo * y + x]`` is the input under
      window point ``(ky, kx)`` of output pixel ``(y, x)``, zero in the padding (written only there,
      :mod:`.torch_conv_borders`).

    The sums are kept in an ``(n, c, ho * grid)`` array, read through a view of the output's shape."""
    n, c = x.shape[0], x.shape[1]
    pixels = str(geo.ho * geo.grid)
    if geo.strided:
        src = ctx.temp(base + "_windows", (n, c, str(geo.kh), str(geo.kw), pixels), x.dtype)
        pad_windows(ctx, src, n, c, geo, pad)  # where the copy below does not write

        def window(it: Index) -> tuple[str, str]:  # it: (n, c, ky, kx, y, x)
            return geo.window_point(*it[2:6])
        ctx.emit(src, (n, c, str(geo.kh), str(geo.kw), str(geo.ho), str(geo.wo)),
                 lambda it, r: x.load((it[0], it[1], *window(it))),
                 guard=inside(*window(tuple(f"i{d}" for d in range(6))), geo.h, geo.w),
                 index=lambda it: (*it[:4], f"{geo.wo} * {it[4]} + {it[5]}"))

        def read(n_: str, chan: str, ky: str, kx: str, p: str) -> str:
            return f"{src}[{n_}, {chan}, {ky}, {kx}, {p}]"
    else:
        src = ctx.temp(base + "_padded", (n, c, str(geo.rows * geo.row)), x.dtype)
        pad_rows(ctx, src, n, c, geo, pad)  # where the copy below does not write
        ctx.emit(src, x.shape, lambda it, r: x.load(it),
                 index=lambda it: (it[0], it[1], f"{geo.row} * {it[2]} + {it[3]} + {geo.ph * geo.row + geo.pw}"))

        def read(n_: str, chan: str, ky: str, kx: str, p: str) -> str:
            return f"{src}[{n_}, {chan}, {p} + {geo.dh * geo.row} * {ky} + {geo.dw} * {kx}]"
    name = ctx.temp(base, (shape[0], shape[1], pixels), acc)
    ctx.emit(name, (shape[0], shape[1], pixels), lambda it, r: start(it))

    def term(it: Index, r: Index) -> str:  # it: (n, co, ci, ky, kx, p)
        n_, co, ci, ky, kx, p = it
        chan = input_channel(co, ci, cin_g, cout_g, int(shape[1]) // cout_g)
        return f"{cast(read(n_, chan, ky, kx, p), x.dtype, acc)} * {cast(w.load((co, ci, ky, kx)), w.dtype, acc)}"
    loops = (shape[0], shape[1], str(cin_g), str(geo.kh), str(geo.kw), pixels)
    ctx.emit(name, loops, term, op="+=", index=lambda it: (it[0], it[1], it[5]))
    return Val(shape, acc, lambda idx: f"{name}[{idx[0]}, {idx[1]}, {geo.grid} * ({idx[2]}) + {idx[3]}]")
