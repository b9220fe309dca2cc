"""Matrix products (mm, bmm, addmm, mv).

Products are an init statement and a multiply-accumulate statement.  Products of 16-bit floats
accumulate in float32 (:func:`.acc_dtype`), bias included, and are rounded once at the op's output, as
oneDNN does.  Convolutions are in :mod:`.torch_ops_conv`.
"""

from __future__ import annotations

import ast

import torch
import torch.fx as fx

from ..cpu_codegen.dot_product import has_integer_dot
from .torch_lower import SegmentLowering, register, tensor_meta
from .torch_ops_reduce import lanes_of, reduce_into
from .torch_product_factors import widening
from .torch_quant_contraction import (
    activation_sums,
    corrections,
    quantized,
    record,
    requantized,
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
    rounded,
    view_of,
)


def _rows_contiguous(v: Val) -> bool:
    """Whether ``v`` reads a stored array with its last index as the array's last subscript (consecutive
    elements of a row are consecutive in memory)."""
    return _contiguous_along(v, v.rank - 1)


CHEAP_LEFT_OPS = 2
"""A left factor of a packed product costing at most this many operations an element is read as an
expression by the packing, not stored first (:func:`_product`)."""


def _packed_on_cpu(ctx: SegmentLowering, a: Val, b: Val, out: torch.dtype, acc: torch.dtype) -> bool:
    """Whether the CPU generator is expected to pack this product's panels, which read ``B`` in whatever
    layout it has: a product accumulating in float32 or float64 (16-bit factors are widened as they are
    packed), or 8-bit integers summed in int32 on a machine with integer dot-product instructions, on the
    CPU under the default fusion policy, which gives it a nest of its own.  Where it is not packed after
    all, ``B`` is read across rows: slower, still exact."""
    if ctx.target() != "cpu" or ctx.options.fuse not in (None, "outer"):
        return False
    if acc == torch.int32:
        # the packed panels of the dot-product instructions read both factors in any layout
        return {a.dtype, b.dtype} <= {torch.int8, torch.uint8} and has_integer_dot()
    return a.dtype == b.dtype and out in (a.dtype, acc) and acc_dtype(a.dtype) == acc in (torch.float32, torch.float64)


def _contiguous_along(v: Val, dim: int) -> bool:
    """Whether ``v`` reads a stored array whose last subscript is ``v``'s index ``dim``: consecutive
    elements along ``dim`` are consecutive in memory."""
    probe = tuple(f"pt_probe{d}" for d in range(v.rank))
    text = v.load(probe)
    return v.ops == 0 and (text.endswith(f", {probe[dim]}]") or text.endswith(f"[{probe[dim]}]"))


def _subscript_names(text: str) -> list[list[set[str]]]:
    """For each array access of the expression ``text`` (the language is Python's syntax), the names in
    each of its subscripts."""
    out = []
    for node in ast.walk(ast.parse(text, mode="eval")):
        if isinstance(node, ast.Subscript):
            subs = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            out.append([{n.id for n in ast.walk(x) if isinstance(n, ast.Name)} for x in subs])
    return out


def _source_along_sum(v: Val) -> bool:
    """Whether the computed ``B`` operand ``v`` (``[.., k, n]``) reads what it is computed from along ``k``:
    every access that ``n`` indexes has ``k``, not ``n``, in its last subscript (``K^T`` of attention with
    its bias added).  Stored as ``[.., n, k]``, such an operand is written and read in consecutive order."""
    probe = tuple(f"pt_probe{d}" for d in range(v.rank))
    k, n = probe[-2], probe[-1]
    reading_n = [subs for subs in _subscript_names(v.load(probe)) if any(n in x for x in subs)]
    return bool(reading_n) and all(k in subs[-1] and n not in subs[-1] for subs in reading_n)


def _stored_operand(ctx: SegmentLowering, b: Val, base: str) -> Val:
    """``B`` for packed panels, which read any layout: as it is where reading it costs nothing, else
    stored, as ``[.., n, k]`` (read back transposed) where it is computed from values laid out along
    ``k`` (:func:`_source_along_sum`): the copy then walks both arrays in order, where the ``[.., k, n]``
    copy read its source with a stride (a scalar loop; BERT's ``K^T``)."""
    if b.ops == 0 or b.rank < 2 or not _source_along_sum(b):
        return ctx.readable(b, base)

    def swap(idx: Index) -> Index:
        return (*idx[:-2], idx[-1], idx[-2])
    shape = swap(b.shape)
    t = ctx.stored(Val(shape, b.dtype, lambda idx: b.load(swap(idx)), ops=b.ops), base)
    return view_of(t, b.shape, swap)


#: Products with at most this many rows (static) whose factors both run contiguously along the sum are
#: computed as dot products in vector lanes (:func:`_skinny_product`) instead of on packed panels: each
#: element of ``B`` serves so few rows that packing it costs more than the products it feeds (a linear
#: layer on a batch of 4: 1024x512 weights packed at each call for 2M multiply-adds).  At 8 rows too: a
#: 1024-1024-1024-256 MLP on a batch of 8 took 3.01 ms packed, 2.05 ms in lanes (one thread, load 0.8);
#: at 16 rows lanes still won (3.60 against 3.09 ms) but by less, and packing pays back as rows grow.
SKINNY_ROWS = 8


def _skinny(ctx: SegmentLowering, a: Val, b: Val, shape: tuple[str, ...], k: str) -> bool:
    rows, lanes = shape[-2], lanes_of(acc_dtype(a.dtype))
    return (not ctx.on_gpu() and len(shape) == 2 and rows.isdigit() and int(rows) <= SKINNY_ROWS
            and lanes > 0 and a.dtype == b.dtype and k.isdigit() and int(k) % lanes == 0 and int(k) >= 4 * lanes
            and _contiguous_along(a, 1) and _contiguous_along(b, 0))


def _skinny_integers(ctx: SegmentLowering, a: Val, b: Val, shape: tuple[str, ...], acc: torch.dtype) -> bool:
    """Whether an integer product (8-bit factors summed in int32) of at most :data:`SKINNY_ROWS` static
    rows, both factors contiguous along the sum, is computed as :func:`_skinny_product`: a plain sum
    along ``k`` for each element, which gcc vectorizes with the dot-product instructions (AVX-512 VNNI's
    ``vpdpbusd`` where present) straight from memory, where packing the weight would cost more than the
    products it feeds."""
    rows = shape[-2] if len(shape) == 2 else ""
    return (acc == torch.int32 and not ctx.on_gpu() and rows.isdigit() and int(rows) <= SKINNY_ROWS
            and _contiguous_along(a, 1) and _contiguous_along(b, 0))


def _skinny_product(ctx: SegmentLowering, node: fx.Node, a: Val, b: Val, acc: torch.dtype) -> Val:
    """``C[i, j] = sum_k A[i, k] * B[k, j]`` as a reduction over ``k`` in vector lanes, ``j`` outermost and
    the few rows ``i`` inside it: each column of ``B`` (a row of a linear layer's weight) is read once from
    memory and serves every row from the cache.  The sum is kept in a ``(j, i)`` array; the result is its
    transposed view."""
    (rows, cols), k = ctx.out(node)[0], a.shape[1]
    if a.dtype != acc and acc.is_floating_point:
        # the few rows, widened once: each of their elements serves every column (16-bit floats were
        # converted again for each one)
        a = ctx.stored(Val(a.shape, acc, lambda idx: cast(a.load(idx), a.dtype, acc), ops=1), node.name + "_wide")
    name = ctx.temp(node.name + "_t", (cols, rows), acc)
    terms = Val((cols, rows, k), acc, lambda it: f"{cast(a.load((it[1], it[2])), a.dtype, acc)} * "
                                                 f"{cast(b.load((it[2], it[0])), b.dtype, acc)}", ops=1)
    reduce_into(ctx, name, terms, [2], False, init=None, combine=lambda x, y: f"{x} + {y}", acc=acc,
                few_inside=True)
    return Val((rows, cols), acc, lambda idx: f"{name}[{idx[1]}, {idx[0]}]")


def _on_tensor_cores(ctx: SegmentLowering, b: Val) -> bool:
    """Whether the product runs on a Triton target, whose ``tl.dot`` loads its tiles of ``B`` through
    any strides: a transposed weight (or ``K`` of attention) is read where it is, and the copy would
    cost a launch of its own."""
    return b.ops == 0 and ctx.on_gpu()


def _product(ctx: SegmentLowering, node: fx.Node, a: Val, b: Val, acc: torch.dtype | None = None) -> Val:
    """``C[.., i, j] = sum_k A[.., i, k] * B[.., k, j]`` in the order (i, k, j): the innermost loop runs
    along rows of B and C; a B that is not stored row by row (a transposed weight) is copied first, except
    where the CPU's packed panels or the GPU's ``tl.dot`` tiles read it in place (measured on the CPU, MLP
    256x512-1024-512: 5.5 -> 4.6 ms).  ``C`` is the accumulator, of the accumulation type: the caller
    rounds it to the output's.  ``acc``, when given, is the accumulation type (int32 for the integer sums
    of quantized products)."""
    shape, out = ctx.out(node)
    if not out.is_floating_point:
        raise LoweringError("integer matrix products run in eager")
    acc = acc or acc_dtype(out)
    packed = _packed_on_cpu(ctx, a, b, out, acc)  # storing `a` keeps its type: the answer stays
    # the packed left panels compute a cheap elementwise factor as they are packed (attention's weights,
    # where(any, softmax, 0)): stored first, it was a copy of the whole factor; batched products only,
    # the case measured (docs/pytorch.md)
    if not (a.ops <= CHEAP_LEFT_OPS and packed and len(shape) > 2):
        a = ctx.readable(a, node.name + "_a")
    if _skinny(ctx, a, b, shape, a.shape[-1]) or _skinny_integers(ctx, a, b, shape, acc):
        return _skinny_product(ctx, node, a, b, acc)
    if packed:
        b = _stored_operand(ctx, b, node.name + "_b")
    elif _rows_contiguous(b) or _on_tensor_cores(ctx, b):
        b = ctx.readable(b, node.name + "_b")
    else:
        b = ctx.stored(b, node.name + "_b")
    k = a.shape[-1]
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


def _factors(ctx: SegmentLowering, node: fx.Node) -> tuple[Val, Val]:
    """The two factors of a product.  Where both convert 16-bit floats of one type to float32 in this
    program (the form :mod:`.torch_product_factors` gives attention's scores), they are read as their
    16-bit values, which the product widens term by term, exactly: on the CPU, in its packed 16-bit
    panels, summed with the dot-product instructions.  (One such factor alone stays float32: a product of
    mixed types is not packed.)  On the CPU only, where :mod:`.torch_product_factors` makes the form."""
    args = node.args[:2]
    narrow = [a.args[0] for a in args if isinstance(a, fx.Node) and a in ctx.values and widening(a)]
    if len(narrow) == 2 and not ctx.on_gpu() and len({getattr(tensor_meta(n), "dtype", None) for n in narrow}) == 1:
        return ctx.val(narrow[0]), ctx.val(narrow[1])
    return ctx.val(args[0]), ctx.val(args[1])


@register("aten.mm.default", kind="reuse")
def _mm(ctx: SegmentLowering, node: fx.Node) -> Val:
    integer = _quantized_product(ctx, node, node.args[0], node.args[1], None)
    if integer is not None:
        return rounded(integer, ctx.out(node)[1])
    return rounded(_product(ctx, node, *_factors(ctx, node)), ctx.out(node)[1])


def _quantized_product(ctx: SegmentLowering, node: fx.Node, a_node: object, b_node: object,
                       bias: Val | None) -> Val | None:
    """``A @ B (+ bias)`` of a dequantized activation (per tensor) and weight in integers
    (:mod:`.torch_quant_contraction`); ``None`` where the factors are not both dequantized 2-D tensors."""
    x, w = quantized(ctx, a_node), quantized(ctx, b_node)
    if (x is None or w is None or x.zero_value is None or not x.per_tensor or x.q.rank != 2 or w.q.rank != 2
            or not w.scales_along(1)):
        return None
    shape = ctx.out(node)[0]
    k = w.q.shape[0]
    xq = ctx.readable(x.q, node.name + "_a")  # read by the sums and the activations' sums
    wsum = weight_sums(ctx, node.name + "_wsum", widened(w.q), shape[1], (k,), lambda it: (it[1], it[0]),
                       x.zero_value)
    asum = None if w.zero_value == 0 else activation_sums(ctx, node.name + "_asum", xq, (shape[0],), (k,),
                                                         lambda it: it, lambda idx: (idx[0],))
    sums = _product(ctx, node, xq, w.q, acc=torch.int32)
    record(ctx, node, x, w)
    bl = broadcast(bias, shape) if bias is not None else None
    return requantized(sums, corrections(x.zero_value, wsum, asum, lambda idx: w.zero(("0", idx[1])), k,
                                         lambda idx: idx[1]),
                       lambda idx: f"({x.scale(idx)} * {w.scale(idx)})",
                       (lambda idx: cast(bl(idx), bias.dtype, torch.float32)) if bl is not None and bias is not None
                       else None)


@register("aten.bmm.default", kind="reuse")
def _bmm(ctx: SegmentLowering, node: fx.Node) -> Val:
    return rounded(_product(ctx, node, *_factors(ctx, node)), ctx.out(node)[1])


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
    if node.kwargs.get("beta", 1) == 1 and node.kwargs.get("alpha", 1) == 1:
        integer = _quantized_product(ctx, node, node.args[1], node.args[2], bias)
        if integer is not None:
            return rounded(integer, ctx.out(node)[1])
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
