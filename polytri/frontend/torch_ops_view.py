"""Views (affine index maps, no computation), concatenation, padding and tensor factories."""

from __future__ import annotations

import sympy
import torch
import torch.fx as fx

from .torch_args import Argument, as_int, as_ints, as_list, as_number, fake
from .torch_lower import SegmentLowering, converted, register
from .torch_symbolic import _expr
from .torch_values import Index, LoweringError, Val, array_val, broadcast, cast, const_val, literal, view_of


def _meta_shape(node: Argument) -> list[sympy.Expr]:
    return [_expr(s) for s in fake(node).shape]


def _norm_dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def _groups(src: list[sympy.Expr], dst: list[sympy.Expr]) -> list[tuple[list[int], list[int]]]:
    """Pair runs of non-unit dimensions of ``src`` and ``dst`` with equal products."""
    a = [i for i, s in enumerate(src) if s != 1]
    b = [j for j, s in enumerate(dst) if s != 1]
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        ga, gb = [a[i]], [b[j]]
        pa, pb = src[a[i]], dst[b[j]]
        i, j = i + 1, j + 1
        while sympy.simplify(pa - pb) != 0:
            if not (pa.is_Integer and pb.is_Integer):
                raise LoweringError("a reshape that splits or merges dynamic dimensions runs in eager")
            if pa < pb and i < len(a):
                ga.append(a[i])
                pa, i = pa * src[a[i]], i + 1
            elif pb < pa and j < len(b):
                gb.append(b[j])
                pb, j = pb * dst[b[j]], j + 1
            else:
                raise LoweringError("reshape with mismatching sizes")
        groups.append((ga, gb))
    if i < len(a) or j < len(b):
        raise LoweringError("reshape with mismatching sizes")
    return groups


def reshape(v: Val, src: list[sympy.Expr], dst: list[sympy.Expr], shape: tuple[str, ...]) -> Val:
    """``v`` (of sizes ``src``) viewed with sizes ``dst`` (row-major order)."""
    groups = _groups(src, dst)

    def index_map(idx: Index) -> Index:
        out = ["0"] * len(src)
        for ga, gb in groups:
            if len(ga) == 1 and len(gb) == 1:
                out[ga[0]] = idx[gb[0]]
                continue
            terms, stride = [], 1
            for jd in reversed(gb):
                terms.append(idx[jd] if stride == 1 else f"{stride} * ({idx[jd]})")
                stride *= int(dst[jd])
            flat = " + ".join(reversed(terms))
            stride = 1
            for k, ia in enumerate(reversed(ga)):
                e = f"({flat})" if stride == 1 else f"(({flat}) // {stride})"
                out[ia] = e if k == len(ga) - 1 else f"({e} % {int(src[ia])})"
                stride *= int(src[ia])
        return tuple(out)
    return view_of(v, shape, index_map)


@register("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten._reshape_alias.default",
          "aten.view_copy.default", "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default",
          "aten.unsqueeze.default", "aten.squeeze_copy.dim", "aten.unsqueeze_copy.default", kind="view")
def _view(ctx: SegmentLowering, node: fx.Node) -> Val:
    v = ctx.val(node.args[0])
    shape, _ = ctx.out(node)
    return reshape(v, _meta_shape(node.args[0]), _meta_shape(node), shape)


@register("aten.permute.default", "aten.permute_copy.default", kind="view")
def _permute(ctx: SegmentLowering, node: fx.Node) -> Val:
    v = ctx.val(node.args[0])
    dims = [_norm_dim(d, v.rank) for d in as_ints(node.args[1])]
    shape, _ = ctx.out(node)

    def index_map(idx: Index) -> Index:
        out = [""] * v.rank
        for k, d in enumerate(dims):
            out[d] = idx[k]
        return tuple(out)
    return view_of(v, shape, index_map)


@register("aten.t.default", "aten.transpose.int", kind="view")
def _transpose(ctx: SegmentLowering, node: fx.Node) -> Val:
    v = ctx.val(node.args[0])
    shape, _ = ctx.out(node)
    if v.rank < 2:
        return v
    d0, d1 = (node.args[1], node.args[2]) if len(node.args) > 2 else (0, 1)
    d0, d1 = _norm_dim(as_int(d0), v.rank), _norm_dim(as_int(d1), v.rank)

    def index_map(idx: Index) -> Index:
        out = list(idx)
        out[d0], out[d1] = idx[d1], idx[d0]
        return tuple(out)
    return view_of(v, shape, index_map)


@register("aten.expand.default", "aten.expand_copy.default", kind="view")
def _expand(ctx: SegmentLowering, node: fx.Node) -> Val:
    v = ctx.val(node.args[0])
    shape, _ = ctx.out(node)
    return Val(shape, v.dtype, broadcast(v, shape), ops=v.ops)


@register("aten.slice.Tensor", "aten.slice_copy.Tensor", kind="view")
def _slice(ctx: SegmentLowering, node: fx.Node) -> Val:
    v = ctx.val(node.args[0])
    shape, _ = ctx.out(node)
    dim = _norm_dim(as_int(node.args[1]) if len(node.args) > 1 else 0, v.rank)
    start_arg = node.args[2] if len(node.args) > 2 else 0
    step = as_int(node.args[4]) if len(node.args) > 4 else 1
    start_arg = 0 if start_arg is None else start_arg
    size = _meta_shape(node.args[0])[dim]
    if isinstance(start_arg, fx.Node):
        raise LoweringError("a slice with dynamic bounds runs in eager")
    start = as_int(start_arg)
    if start < 0:
        if not size.is_Integer:
            raise LoweringError("a negative slice start on a dynamic dimension runs in eager")
        start = max(0, int(size) + start)
    if size.is_Integer:
        start = min(start, int(size))

    def index_map(idx: Index) -> Index:
        out = list(idx)
        out[dim] = f"{start} + {step} * {idx[dim]}" if step != 1 else (f"{idx[dim]} + {start}" if start else idx[dim])
        return tuple(out)
    return view_of(v, shape, index_map)


@register("aten.select.int", "aten.select_copy.int", kind="view")
def _select(ctx: SegmentLowering, node: fx.Node) -> Val:
    v = ctx.val(node.args[0])
    shape, _ = ctx.out(node)
    dim = _norm_dim(as_int(node.args[1]), v.rank)
    if isinstance(node.args[2], fx.Node):
        raise LoweringError("select with a dynamic index runs in eager")
    index = as_int(node.args[2])
    pos = str(index)
    if index < 0:
        size = _meta_shape(node.args[0])[dim]
        pos = str(int(size) + index) if size.is_Integer else f"{v.shape[dim]} - {-index}"
    return view_of(v, shape, lambda idx: tuple(idx[:dim]) + (pos,) + tuple(idx[dim:]))


@register("aten.split_with_sizes.default", "aten.split.Tensor", kind="view")
def _split(ctx: SegmentLowering, node: fx.Node) -> tuple[Val, ...]:
    v = ctx.val(node.args[0])
    dim = _norm_dim(as_int(node.args[2]) if len(node.args) > 2 else 0, v.rank)
    outs, offset = [], 0
    for k, part in enumerate(node.meta["val"]):
        shape, _ = ctx.out(node, k)
        extent = _expr(part.shape[dim])
        if not extent.is_Integer:
            raise LoweringError("split of a dynamic dimension runs in eager")

        def index_map(idx: Index, off: int = offset) -> Index:
            out = list(idx)
            out[dim] = f"{idx[dim]} + {off}" if off else idx[dim]
            return tuple(out)
        outs.append(view_of(v, shape, index_map))
        offset += int(extent)
    return tuple(outs)


@register("aten.cat.default", kind="reduce")
def _cat(ctx: SegmentLowering, node: fx.Node) -> Val:
    shape, dtype = ctx.out(node)
    dim = _norm_dim(as_int(node.args[1]) if len(node.args) > 1 else 0, len(shape))
    name = ctx.temp(node.name, shape, dtype)
    offset = "0"
    for t in as_list(node.args[0]):
        tv = fake(t)
        if tv.dim() == 1 and tv.shape[0] == 0 and len(shape) != 1:
            continue  # legacy empty inputs are skipped by torch.cat
        v = ctx.val(t)
        off = offset

        def index(idx: Index, off: str = off) -> Index:
            out = list(idx)
            out[dim] = f"{idx[dim]} + {off}" if off != "0" else idx[dim]
            return tuple(out)
        ctx.emit(name, v.shape, converted(v, dtype), index=index)
        offset = v.shape[dim] if offset == "0" else f"{offset} + {v.shape[dim]}"
    return array_val(name, shape, dtype)


@register("aten.constant_pad_nd.default", kind="reduce")
def _pad(ctx: SegmentLowering, node: fx.Node) -> Val:
    v = ctx.val(node.args[0])
    shape, dtype = ctx.out(node)
    pad = as_list(node.args[1])
    value = node.args[2] if len(node.args) > 2 else 0
    if any(isinstance(p, fx.Node) for p in pad):
        raise LoweringError("dynamic padding runs in eager")
    name = ctx.temp(node.name, shape, dtype)
    fill = const_val(value, shape, dtype)
    ctx.emit(name, shape, lambda idx, red: fill.load(idx))
    lo = [0] * v.rank
    cut_lo, cut_hi = [0] * v.rank, [0] * v.rank
    for k in range(len(pad) // 2):
        d = v.rank - 1 - k
        left, right = as_int(pad[2 * k]), as_int(pad[2 * k + 1])
        lo[d] = left
        cut_lo[d], cut_hi[d] = max(0, -left), max(0, -right)
    counts = tuple(s if cut_lo[d] == cut_hi[d] == 0 else f"{s} - {cut_lo[d] + cut_hi[d]}"
                   for d, s in enumerate(v.shape))
    src = tuple(f"i{d} + {cut_lo[d]}" if cut_lo[d] else f"i{d}" for d in range(v.rank))

    def index(idx: Index) -> Index:
        return tuple(f"{idx[d]} + {cut_lo[d] + lo[d]}" if cut_lo[d] + lo[d] else idx[d] for d in range(v.rank))
    ctx.emit(name, counts, lambda idx, red: cast(v.load(src), v.dtype, dtype), index=index,
             guard=[f"{c} > 0" for c in counts if not c.isdigit()])
    return array_val(name, shape, dtype)


@register("aten.full.default", "aten.full_like.default", "aten.zeros_like.default", "aten.ones_like.default",
          "aten.scalar_tensor.default", "aten.zeros.default", "aten.ones.default", "aten.empty_like.default",
          kind="pointwise")
def _full(ctx: SegmentLowering, node: fx.Node) -> Val:
    shape, dtype = ctx.out(node)
    name = str(node.target)
    if "zeros" in name or "empty" in name:
        value: Argument = 0
    elif "ones" in name:
        value = 1
    elif "scalar_tensor" in name:
        value = node.args[0]
    else:
        value = node.args[1]
    if isinstance(value, fx.Node):
        raise LoweringError("a fill value computed at run time runs in eager")
    return const_val(value, shape, dtype)


@register("aten.arange.start_step", "aten.arange.default", "aten.arange.start", kind="pointwise")
def _arange(ctx: SegmentLowering, node: fx.Node) -> Val:
    shape, dtype = ctx.out(node)
    args = list(node.args)
    if len(args) == 1:
        args = [0, args[0], 1]
    elif len(args) == 2:
        args = [args[0], args[1], 1]
    start, _, step = args[:3]
    if any(isinstance(a, fx.Node) for a in (start, step)):
        raise LoweringError("arange with run-time bounds runs in eager")
    start, step = as_number(start), as_number(step)
    if isinstance(start, float) or isinstance(step, float):
        if not (float(start).is_integer() and float(step).is_integer()):
            raise LoweringError("arange with fractional start or step runs in eager")
        start, step = int(start), int(step)
    text = f"({literal(start)} + {literal(step)} * {{i}})"
    return Val(shape, dtype, lambda idx: cast(text.format(i=idx[0]), torch.int64, dtype), ops=2)

