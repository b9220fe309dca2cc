"""Matrix products (mm, bmm, addmm, mv) and 2-D convolution (stride, padding, dilation, groups).

Products are an init statement and a multiply-accumulate statement.  A convolution whose reduction
(input channels of a group x kernel window) is small and static is written as one statement with the
window unrolled: no accumulation loop, every output element written once (the separable blur's case).
Products and convolutions of 16-bit floats accumulate in float32 (:func:`.acc_dtype`), bias included, and
are rounded once at the op's output, as oneDNN does.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.fx as fx

from .torch_args import as_int, as_ints, fake
from .torch_lower import SegmentLowering, register
from .torch_ops_reduce import LANES, reduce_into
from .torch_values import Index, LoweringError, Val, acc_dtype, array_val, broadcast, cast, literal, rounded

#: Convolutions with at most this many terms per output element are unrolled into one statement.
MAX_UNROLLED_TERMS = 32
#: An unrolled convolution recomputes an elementwise or unrolled input inside its own statement (instead of
#: storing it) while the operations per output element stay within this budget.
MAX_RECOMPUTE_OPS = 160


def _rows_contiguous(v: Val) -> bool:
    """Whether ``v`` reads a stored array with its last index as the array's last subscript (consecutive
    elements of a row are consecutive in memory)."""
    probe = tuple(f"pt_probe{d}" for d in range(v.rank))
    text = v.load(probe)
    return v.ops == 0 and (text.endswith(f", {probe[-1]}]") or text.endswith(f"[{probe[-1]}]"))


def _packed_on_cpu(ctx: SegmentLowering, a: Val, b: Val, out: torch.dtype) -> bool:
    """Whether the CPU generator is expected to pack this product's panels, which read ``B`` in whatever
    layout it has: a product accumulating in float32 or float64 (16-bit factors are widened as they are
    packed) on the CPU under the default fusion policy, which gives it a nest of its own.  Where it is not
    packed after all, ``B`` is read across rows: slower, still exact."""
    return (ctx.target() == "cpu" and ctx.options.fuse in (None, "outer") and a.dtype == b.dtype == out
            and acc_dtype(out) in (torch.float32, torch.float64))


def _contiguous_along(v: Val, dim: int) -> bool:
    """Whether ``v`` reads a stored array whose last subscript is ``v``'s index ``dim``: consecutive
    elements along ``dim`` are consecutive in memory."""
    probe = tuple(f"pt_probe{d}" for d in range(v.rank))
    text = v.load(probe)
    return v.ops == 0 and (text.endswith(f", {probe[dim]}]") or text.endswith(f"[{probe[dim]}]"))


#: Products with at most this many rows (static) whose factors both run contiguously along the sum are
#: computed as dot products in vector lanes (:func:`_skinny_product`) instead of on packed panels: each
#: element of ``B`` serves so few rows that packing it costs more than the products it feeds (a linear
#: layer on a batch of 4: 1024x512 weights packed at each call for 2M multiply-adds).
SKINNY_ROWS = 4


def _skinny(ctx: SegmentLowering, a: Val, b: Val, shape: tuple[str, ...], k: str) -> bool:
    rows, lanes = shape[-2], LANES.get(acc_dtype(a.dtype), 0)
    return (not ctx.on_gpu() and len(shape) == 2 and rows.isdigit() and int(rows) <= SKINNY_ROWS
            and lanes > 0 and a.dtype == b.dtype and k.isdigit() and int(k) % lanes == 0 and int(k) >= 4 * lanes
            and _contiguous_along(a, 1) and _contiguous_along(b, 0))


def _skinny_product(ctx: SegmentLowering, node: fx.Node, a: Val, b: Val, acc: torch.dtype) -> Val:
    """``C[i, j] = sum_k A[i, k] * B[k, j]`` as a reduction over ``k`` in vector lanes, ``j`` outermost and
    the few rows ``i`` inside it: each column of ``B`` (a row of a linear layer's weight) is read once from
    memory and serves every row from the cache.  The sum is kept in a ``(j, i)`` array; the result is its
    transposed view."""
    (rows, cols), k = ctx.out(node)[0], a.shape[1]
    name = ctx.temp(node.name + "_t", (cols, rows), acc)
    terms = Val((cols, rows, k), acc, lambda it: f"{cast(a.load((it[1], it[2])), a.dtype, acc)} * "
                                                 f"{cast(b.load((it[2], it[0])), b.dtype, acc)}", ops=1)
    reduce_into(ctx, name, terms, [2], False, init=None, combine=lambda x, y: f"{x} + {y}", acc=acc)
    return Val((rows, cols), acc, lambda idx: f"{name}[{idx[1]}, {idx[0]}]")


def _on_tensor_cores(ctx: SegmentLowering, b: Val) -> bool:
    """Whether the product runs on a Triton target, whose ``tl.dot`` loads its tiles of ``B`` through
    any strides: a transposed weight (or ``K`` of attention) is read where it is, and the copy would
    cost a launch of its own."""
    return b.ops == 0 and ctx.on_gpu()


def _product(ctx: SegmentLowering, node: fx.Node, a: Val, b: Val) -> Val:
    """``C[.., i, j] = sum_k A[.., i, k] * B[.., k, j]`` in the order (i, k, j): the innermost loop runs
    along rows of B and C; a B that is not stored row by row (a transposed weight) is copied first, except
    where the CPU's packed panels or the GPU's ``tl.dot`` tiles read it in place (measured on the CPU, MLP
    256x512-1024-512: 5.5 -> 4.6 ms).  ``C`` is the accumulator, of the accumulation type: the caller
    rounds it to the output's."""
    shape, out = ctx.out(node)
    if not out.is_floating_point:
        raise LoweringError("integer matrix products run in eager")
    a = ctx.readable(a, node.name + "_a")
    if _skinny(ctx, a, b, shape, a.shape[-1]):
        return _skinny_product(ctx, node, a, b, acc_dtype(out))
    in_place = _rows_contiguous(b) or _packed_on_cpu(ctx, a, b, out) or _on_tensor_cores(ctx, b)
    b = ctx.readable(b, node.name + "_b") if in_place else ctx.stored(b, node.name + "_b")
    k = a.shape[-1]
    acc = acc_dtype(out)
    name = ctx.temp(node.name, shape, acc)
    lead = len(shape) - 2

    def term(it: Index, r: Index) -> str:
        x = cast(a.load(it[:lead] + (it[lead], it[lead + 1])), a.dtype, acc)
        y = cast(b.load(it[:lead] + (it[lead + 1], it[lead + 2])), b.dtype, acc)
        return f"{x} * {y}"
    ctx.emit(name, shape, lambda it, r: "0")
    loops = shape[:lead] + (shape[lead], k, shape[lead + 1])
    ctx.emit(name, loops, term, op="+=", index=lambda it: it[:lead] + (it[lead], it[lead + 2]))
    return array_val(name, shape, acc)


@register("aten.mm.default", kind="reuse")
def _mm(ctx: SegmentLowering, node: fx.Node) -> Val:
    return rounded(_product(ctx, node, ctx.val(node.args[0]), ctx.val(node.args[1])), ctx.out(node)[1])


@register("aten.bmm.default", kind="reuse")
def _bmm(ctx: SegmentLowering, node: fx.Node) -> Val:
    return rounded(_product(ctx, node, ctx.val(node.args[0]), ctx.val(node.args[1])), ctx.out(node)[1])


@register("aten.mv.default", kind="reuse")
def _mv(ctx: SegmentLowering, node: fx.Node) -> Val:
    a, x = ctx.readable(ctx.val(node.args[0]), node.name + "_a"), ctx.readable(ctx.val(node.args[1]), node.name + "_x")
    shape, out = ctx.out(node)
    acc = acc_dtype(out)
    name = ctx.temp(node.name, shape, acc)
    ctx.emit(name, shape, lambda it, r: "0")
    ctx.emit(name, shape, lambda it, r: f"{cast(a.load((it[0], r[0])), a.dtype, acc)} * "
                                       f"{cast(x.load((r[0],)), x.dtype, acc)}", op="+=", red=(a.shape[1],))
    return rounded(array_val(name, shape, acc), out)


@register("aten.addmm.default", kind="reuse")
def _addmm(ctx: SegmentLowering, node: fx.Node) -> Val:
    """``beta * bias + alpha * A @ B``, the bias added to the accumulator before the one rounding."""
    bias = ctx.val(node.args[0])
    prod = _product(ctx, node, ctx.val(node.args[1]), ctx.val(node.args[2]))
    beta, alpha = node.kwargs.get("beta", 1), node.kwargs.get("alpha", 1)
    shape, out = ctx.out(node)
    bl = broadcast(bias, shape)

    def load(idx: Index) -> str:
        p = prod.load(idx) if alpha == 1 else f"{literal(alpha)} * {prod.load(idx)}"
        c = cast(bl(idx), bias.dtype, prod.dtype)
        if beta == 0:
            return f"({p})"
        return f"({p} + {c})" if beta == 1 else f"({p} + {literal(beta)} * {c})"
    return rounded(Val(shape, prod.dtype, load, ops=bias.ops + 1), out)


@register("aten.convolution.default", kind="reuse")
def _convolution(ctx: SegmentLowering, node: fx.Node) -> Val:
    x_node, w_node, b_node, stride_arg, padding_arg, dilation_arg, transposed, _, groups = node.args[:9]
    if transposed:
        raise LoweringError("transposed convolutions run in eager")
    shape, out = ctx.out(node)
    if len(shape) != 4 or not out.is_floating_point:
        raise LoweringError("only 2-D floating-point convolutions are lowered")
    x, w = ctx.val(x_node), ctx.val(w_node)
    acc = acc_dtype(out)
    bias = ctx.val(b_node) if isinstance(b_node, fx.Node) else None
    wmeta = fake(w_node)
    cin_g, kh, kw = (int(s) if not isinstance(s, torch.SymInt) else None for s in wmeta.shape[1:])
    stride, padding, dilation = as_ints(stride_arg), as_ints(padding_arg), as_ints(dilation_arg)
    padded = padding[0] or padding[1]
    terms = (cin_g or 0) * (kh or 0) * (kw or 0)
    unroll = cin_g is not None and kh is not None and kw is not None and terms <= MAX_UNROLLED_TERMS and not padded
    if not (unroll and x.ops * terms <= MAX_RECOMPUTE_OPS):
        x = ctx.readable(x, node.name + "_x")
    w = ctx.readable(w, node.name + "_w")
    cout = wmeta.shape[0]
    if cin_g is None or kh is None or kw is None or isinstance(cout, torch.SymInt):
        raise LoweringError("convolutions with dynamic weight shapes run in eager")
    g = as_int(groups)
    cout_g = int(cout) // g
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    flat = not unroll and _flattened(ctx, shape)
    if flat and padded:  # a zero-padded copy of the input: the product's domain stays a box
        x, ph, pw, padded = _zero_padded(ctx, x, ph, pw, node.name + "_padded"), 0, 0, False
    height, width = x.shape[2], x.shape[3]

    def coords(it: Index, ci: str, ky: str, kx: str) -> tuple[Index, str, str]:
        y = f"{sh} * {it[2]} + {dh} * {ky} - {ph}"
        xx = f"{sw} * {it[3]} + {dw} * {kx} - {pw}"
        chan = ci if g == 1 else f"({it[1]} // {cout_g}) * {cin_g} + {ci}"
        return (it[0], chan, y, xx), y, xx

    def term(it: Index, ci: str, ky: str, kx: str) -> str:
        idx, _, _ = coords(it, ci, ky, kx)
        return f"{cast(x.load(idx), x.dtype, acc)} * {cast(w.load((it[1], ci, ky, kx)), w.dtype, acc)}"

    bl = broadcast(bias, (shape[1],)) if bias is not None else None
    start = (lambda it: cast(bl((it[1],)), bias.dtype, acc)) if bl is not None and bias is not None else (lambda it: "0")
    if unroll:
        def unrolled(it: Index) -> str:
            parts = [term(it, str(c), str(a), str(b)) for c in range(cin_g) for a in range(kh) for b in range(kw)]
            total = " + ".join(parts)
            return f"({start(it)} + {total})" if bias is not None else f"({total})"
        # computed where it is read (the consumer stores it, or recomputes it if cheap enough)
        return rounded(Val(shape, acc, unrolled, ops=2 * terms + x.ops * terms + (bias.ops if bias else 0)), out)
    if flat:
        return rounded(_implicit_gemm(ctx, node.name, shape, acc, (cin_g, kh, kw), term, start), out)
    name = ctx.temp(node.name, shape, acc)
    ctx.emit(name, shape, lambda it, r: start(it))
    # loops (n, co, ci, ky, kx, y, x): the weight is invariant and x runs along rows of input and output
    guard: list[str] = []
    if padded:
        _, y, xx = coords(("i0", "i1", "i5", "i6"), "i2", "i3", "i4")
        guard = [f"{y} >= 0", f"{y} < {height}", f"{xx} >= 0", f"{xx} < {width}"]
    loops = (shape[0], shape[1], str(cin_g), str(kh), str(kw), shape[2], shape[3])
    ctx.emit(name, loops, lambda it, r: term((it[0], it[1], it[5], it[6]), it[2], it[3], it[4]), op="+=",
             guard=guard, index=lambda it: (it[0], it[1], it[5], it[6]))
    return rounded(array_val(name, shape, acc), out)


def _flattened(ctx: SegmentLowering, shape: tuple[str, ...]) -> bool:
    """Whether a convolution is computed as an implicit GEMM over the flattened output pixels: on the CPU,
    for static output sizes."""
    return not ctx.on_gpu() and shape[2].isdigit() and shape[3].isdigit()


def _zero_padded(ctx: SegmentLowering, x: Val, ph: int, pw: int, base: str) -> Val:
    """``x`` (``n, c, h, w``) with ``ph`` rows and ``pw`` columns of zeros on each side, in an array."""
    n, c, h, w = x.shape
    shape = (n, c, f"{h} + {2 * ph}", f"{w} + {2 * pw}")
    name = ctx.temp(base, shape, x.dtype)
    ctx.emit(name, shape, lambda it, r: "0")
    ctx.emit(name, x.shape, lambda it, r: x.load(it), index=lambda it: (it[0], it[1], f"{it[2]} + {ph}", f"{it[3]} + {pw}"))
    return array_val(name, shape, x.dtype)


def _implicit_gemm(ctx: SegmentLowering, base: str, shape: tuple[str, ...], acc: torch.dtype,
                   window: tuple[int, int, int], term: Callable[[Index, str, str, str], str],
                   start: Callable[[Index], str]) -> Val:
    """The convolution as a product: rows are output channels, columns the ``H * W`` output pixels of an
    image (one iterator ``p``: ``y = p // W``, ``x = p % W``), the sum runs over input channels and the
    window.  The CPU's packed contraction then fills its register blocks with pixels of whole images, not
    of one row: a 28-pixel row used 28 of 64 columns of every block, an edge block each time.  The sums
    are kept in an ``(n, c, H * W)`` array, read through a view of the output's shape.  The input has no
    padding (the caller pads a copy): a guard in ``p // W`` and ``p % W`` would make the domain a union
    the scheduler skews."""
    height, width = int(shape[2]), int(shape[3])
    name = ctx.temp(base, (shape[0], shape[1], str(height * width)), acc)

    def pixel(it: Index, p: str) -> Index:
        return (it[0], it[1], f"({p} // {width})", f"({p} % {width})")
    ctx.emit(name, (shape[0], shape[1], str(height * width)), lambda it, r: start(pixel(it, it[2])))
    cin_g, kh, kw = window
    loops = (shape[0], shape[1], str(cin_g), str(kh), str(kw), str(height * width))
    ctx.emit(name, loops, lambda it, r: term(pixel(it, it[5]), it[2], it[3], it[4]), op="+=",
             index=lambda it: (it[0], it[1], it[5]))
    return Val(shape, acc, lambda idx: f"{name}[{idx[0]}, {idx[1]}, {width} * {idx[2]} + {idx[3]}]")
