"""Reductions (sum, mean, amax, amin, var, any, all, cumsum), softmax, log_softmax and layer norm.

A reduction is an init statement and an accumulate statement over the output's domain times the reduced
dimensions; normalizations are reductions followed by an elementwise value read where it is used.

Sums, means, variances and normalizations of 16-bit floats accumulate, and keep their intermediates, in
float32 (:func:`.acc_dtype`), rounded once at the op's output, as ATen does.  Maxima and minima are exact
in any type: they run in the output's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx as fx

from ..cpu_codegen.blocking import vector_bytes, vector_registers
from ..pipeline.decisions import Decision
from .torch_args import Number, as_float, as_int, as_list, as_number
from .torch_lower import SegmentLowering, register
from .torch_ops_pointwise import nan_max, nan_min
from .torch_values import Index, LoweringError, Val, acc_dtype, array_val, cast, rounded


def _dims(arg: Any, rank: int) -> list[int]:
    if arg is None or arg == []:
        return list(range(rank))
    if isinstance(arg, int):
        arg = [arg]
    return sorted({d + rank if d < 0 else d for d in arg}) if rank else []


def _split(v: Val, dims: Sequence[int]) -> tuple[list[int], Callable[[Index, Index], Index]]:
    """Kept dimensions, and the input index from (kept iterators, reduction iterators)."""
    kept = [d for d in range(v.rank) if d not in dims]

    def index(it: Index, red: Index) -> Index:
        out = [""] * v.rank
        for k, d in enumerate(kept):
            out[d] = it[k]
        for k, d in enumerate(dims):
            out[d] = red[k]
        return tuple(out)
    return kept, index


def reduce_into(ctx: SegmentLowering, name: str, v: Val, dims: Sequence[int], keepdim: bool, *,
                init: Callable[[Callable[[Index], str]], Callable[[Index], str]] | None,
                combine: Callable[[str, str], str], acc: torch.dtype, value: Callable[[str], str] | None = None,
                few_inside: bool = False) -> None:
    """``name[kept...] = combine(name, x)`` over the reduced dims of ``v`` (after an init statement).

    ``init`` maps "load of the first reduced element" to the initial value (``None``: 0).  The elements
    are converted to ``acc``, the type of ``name`` and of its partial results."""
    kept, index = _split(v, dims)
    shape = tuple(v.shape[d] for d in kept)
    red = tuple(v.shape[d] for d in dims)

    def target(it: Index) -> Index:  # the element of a keepdim result: 0 in the reduced dims
        return _expand_kept(it, v.rank, dims, False) if keepdim else it

    def x(it: Index, r: Index) -> str:
        t = cast(v.load(index(it, r)), v.dtype, acc)
        return value(t) if value else t

    lanes = 0 if ctx.on_gpu() else lanes_of(acc)  # Triton chunks a reduction itself
    ext = red[-1] if dims and dims[-1] == v.rank - 1 else ""
    if lanes and ext.isdigit() and int(ext) >= 4 * lanes:
        inside = math.prod(int(e) for e in shape[1:]) if few_inside else 1
        chains = chains_of(int(ext), lanes, inside)
        _reduce_in_lanes(ctx, name, shape, red, lanes, chains, x, target, init=init, combine=combine, acc=acc,
                         few_inside=few_inside)
        return

    def tgt(it: Index) -> str:
        return f"{name}[{', '.join(target(it)) or '0'}]"

    def first(it: Index) -> str:
        return x(it, tuple("0" for _ in dims))
    start = init(first) if init is not None else (lambda it: "0")
    ctx.emit(name, shape, lambda it, r: start(it), index=target)
    ctx.emit(name, shape, lambda it, r: combine(tgt(it), x(it, r)), red=red, index=target)


#: Reductions over a contiguous static dimension of at least four vectors accumulate one vector of the
#: machine's partial results side by side (:func:`lanes_of`), so the accumulation loop carries no
#: dependence and vectorizes (on the CPU target: Triton kernels reduce chunks with tl.sum / tl.max, and
#: the online softmax matches the plain form).  When the extent is not a multiple of the partial results
#: (ViT's 197 tokens), the accumulation's last step covers only the elements left, in the first partial
#: results (a guard on its domain, no statement more): before, such a dimension was reduced one element
#: at a time (ViT's attention softmax, the max and the sum of 197 scores per row, took longer than the two
#: products around it, profiled on one thread).
#: Keyed by the accumulator's type, the bytes of one partial result: float16 and bfloat16 sums accumulate
#: in float32 and take its lanes; ``any`` and ``all`` take as many as float32, the type their tests usually
#: compare (sdpa's test of fully masked rows, one element at a time, took half of the softmax's time at
#: 197 tokens).
LANE_BYTES = {torch.float32: 4, torch.float64: 8, torch.bool: 4}

#: Vectors of partial results when the dimension is long enough (a multiple of this many vectors, at
#: least four times over; a power of two): independent chains of operations, where one vector makes every
#: step wait for the latency of the step before.  Row sum + amax 2048x2048, already with the local buffers
#: of cpu_codegen/private.py, went from 0.63x to 1.02x Inductor's speed (interleaved, medians).
ACCUMULATORS = 4


def lanes_of(acc: torch.dtype) -> int:
    """Partial results of a reduction accumulating in ``acc``, side by side: one vector register of the
    machine that builds the kernel (16 float32 with AVX-512, 8 with AVX2); 0 for a type summed one element
    at a time."""
    size = LANE_BYTES.get(acc)
    return vector_bytes() // size if size else 0


def chains_of(extent: int, lanes: int, inside: int = 1) -> int:
    """Vectors of partial results per reduced element: :data:`ACCUMULATORS` when the dimension holds at
    least four times as many values, else 1; and when ``inside`` elements accumulate side by side (the
    few rows of a skinny product), no more than fit with theirs in half the vector registers: kept in
    memory, every step loads and stores its partial results (the zoo's MLP, a batch of 4, under
    ``POLYTRI_MAX_ISA=avx2``, one thread, load 0.53: 4 rows of 64 partial results, 32 vectors, ran in 0.36
    ms; of 32, 16 vectors, in 0.25 ms; of 16, 8 vectors, in 0.17 ms)."""
    chains = ACCUMULATORS if extent >= 4 * ACCUMULATORS * lanes else 1
    while chains > 1 and chains * inside > vector_registers() // 2:
        chains //= 2
    return chains


def _reduce_in_lanes(ctx: SegmentLowering, name: str, shape: tuple[str, ...], red: tuple[str, ...], lanes: int,
                     chains: int, x: Callable[[Index, Index], str], target: Callable[[Index], Index], *,
                     init: Callable[[Callable[[Index], str]], Callable[[Index], str]] | None,
                     combine: Callable[[str, str], str], acc: torch.dtype, few_inside: bool = False) -> None:
    """The reduction in steps: ``chains * lanes`` partial results over the innermost reduced dimension split
    as ``width * q + l`` (``l`` innermost, parallel; the last ``q`` covers only the elements left when the
    extent is not a multiple of ``width``, in the first partial results), folded pairwise into the first
    ``lanes`` (one statement, a parallel loop over the lanes), then those combined in order.  With
    ``few_inside`` (a product of a few rows), the kept dimensions after the first run inside each step of
    the accumulation: a chunk of the other factor (a weight's row) is loaded once for all the rows."""
    width = lanes * chains
    whole, rem = divmod(int(red[-1]), width)
    _record_lanes(ctx, name, int(red[-1]), width, rem)
    part = ctx.temp(name.removeprefix("t_") + "_lanes", shape + (str(width),), acc)
    k = len(shape)
    outer = red[:-1]
    zeros = tuple("0" for _ in outer)

    nest = shape[:1] if few_inside else shape
    with ctx.one_nest(nest):  # each element's steps in one nest: its partial results stay in the cache
        def lane_first(it: Index) -> str:
            return x(it[:k], zeros + (it[k],))
        start = init(lane_first) if init is not None else (lambda it: "0")
        ctx.emit(part, shape + (str(width),), lambda it, r: start(it))

        def cell(it: Index, lane: str) -> str:
            return f"{part}[{', '.join(it + (lane,))}]"

        def acc_rhs(it: Index, r: Index) -> str:
            return combine(cell(it, r[-1]), x(it, r[:-2] + (f"{width} * {r[-2]} + {r[-1]}",)))
        q, lane = f"r{len(outer)}", f"r{len(outer) + 1}"  # emit's names of the last two reduction iterators
        ctx.emit(part, shape, acc_rhs, red=outer + (str(whole + (rem > 0)), str(width)),
                 guard=(f"{width} * {q} + {lane} < {red[-1]}",) if rem else (), target_index=lambda it, r: it + (r[-1],),
                 kept_inside=few_inside)
        if chains > 1:
            def fold(it: Index, r: Index, lo: int = 0, n: int = chains) -> str:  # pairwise: ((0, 1), (2, 3))
                if n == 1:
                    return cell(it, f"{r[0]} + {lo * lanes}" if lo else r[0])
                return f"({combine(fold(it, r, lo, n // 2), fold(it, r, lo + n // 2, n // 2))})"
            ctx.emit(part, shape, fold, red=(str(lanes),), target_index=lambda it, r: it + (r[0],))

        def tgt(it: Index) -> str:
            return f"{name}[{', '.join(target(it)) or '0'}]"
        first = (lambda it: cell(it, "0")) if init is not None else (lambda it: "0")
        ctx.emit(name, shape, lambda it, r: first(it), index=target)
        ctx.emit(name, shape, lambda it, r: combine(tgt(it), cell(it, r[0])), red=(str(lanes),), index=target)


def _record_lanes(ctx: SegmentLowering, name: str, extent: int, width: int, rem: int) -> None:
    """File a reduction in partial results among the segment's decisions (``explain()`` lists it)."""
    node = ctx.current.name if ctx.current is not None else name
    last = f", the last {rem} into the first {rem}" if rem else ""
    ctx.segment.decisions.append(Decision(
        "lowering", "reduction-lanes", node, f"{node}: {name} reduced over {extent} elements in {width} "
        f"partial results side by side{last}", {"array": name, "extent": extent, "partials": width, "remainder": rem}))


def _count(v: Val, dims: Sequence[int]) -> str:
    parts = [v.shape[d] for d in dims]
    if all(p.isdigit() for p in parts):
        n = 1
        for p in parts:
            n *= int(p)
        return str(n)
    return "(" + " * ".join(f"({p})" for p in parts) + ")" if parts else "1"


def _sum_like(ctx: SegmentLowering, node: fx.Node, mean: bool) -> Val:
    v = ctx.val(node.args[0])
    shape, out = ctx.out(node)
    dims = _dims(node.args[1] if len(node.args) > 1 else None, v.rank)
    keepdim = bool(node.args[2]) if len(node.args) > 2 else bool(node.kwargs.get("keepdim", False))
    if mean and not out.is_floating_point:
        raise LoweringError("mean of integers runs in eager")
    acc = acc_dtype(out)
    name = ctx.temp(node.name, shape, acc)
    reduce_into(ctx, name, v, dims, keepdim, init=None, combine=lambda a, b: f"{a} + {b}", acc=acc)
    if mean:
        n = _count(v, dims)
        ctx.emit(name, shape, lambda it, r: f"{name}[{', '.join(it) or '0'}] / {n}")
    return rounded(array_val(name, shape, acc), out)


@register("aten.sum.dim_IntList", "aten.sum.default", kind="reduce")
def _sum(ctx: SegmentLowering, node: fx.Node) -> Val:
    return _sum_like(ctx, node, False)


@register("aten.mean.dim", "aten.mean.default", kind="reduce")
def _mean(ctx: SegmentLowering, node: fx.Node) -> Val:
    return _sum_like(ctx, node, True)


def _extreme(combine: Callable[[str, str], str]) -> Callable[[SegmentLowering, fx.Node], Val]:
    def lower(ctx: SegmentLowering, node: fx.Node) -> Val:
        v = ctx.val(node.args[0])
        shape, out = ctx.out(node)
        dims = _dims(node.args[1] if len(node.args) > 1 else None, v.rank)
        keepdim = bool(node.args[2]) if len(node.args) > 2 else bool(node.kwargs.get("keepdim", False))
        if any(v.shape[d] == "0" for d in dims):
            raise LoweringError("an empty max/min reduction runs in eager (it raises)")
        name = ctx.temp(node.name, shape, out)
        reduce_into(ctx, name, v, dims, keepdim, init=lambda first: first, combine=combine, acc=out)
        return array_val(name, shape, out)
    return lower


register("aten.amax.default", "aten.max.default", kind="reduce")(_extreme(nan_max))
register("aten.amin.default", "aten.min.default", kind="reduce")(_extreme(nan_min))


def _truth(combine: Callable[[str, str], str], empty: str) -> Callable[[SegmentLowering, fx.Node], Val]:
    """``any`` / ``all``: the truth of each element (``x != 0``) folded with ``combine`` from ``empty``, the
    result of an empty reduction."""
    def lower(ctx: SegmentLowering, node: fx.Node) -> Val:
        v = ctx.val(node.args[0])
        shape, out = ctx.out(node)
        if out != torch.bool:
            raise LoweringError(f"{node.target} with a {out} result runs in eager")
        dims = _dims(node.args[1] if len(node.args) > 1 else node.kwargs.get("dim"), v.rank)
        keepdim = bool(node.args[2]) if len(node.args) > 2 else bool(node.kwargs.get("keepdim", False))
        name = ctx.temp(node.name, shape, torch.bool)
        reduce_into(ctx, name, v, dims, keepdim, init=lambda first: lambda it: empty, combine=combine,
                    acc=torch.bool)
        return array_val(name, shape, torch.bool)
    return lower


register("aten.any.dim", "aten.any.dims", "aten.any.default", kind="reduce")(
    _truth(lambda acc, x: f"where({x}, True, {acc})", "False"))
register("aten.all.dim", "aten.all.dims", "aten.all.default", kind="reduce")(
    _truth(lambda acc, x: f"where({x}, {acc}, False)", "True"))


@register("aten.cumsum.default", kind="reduce")
def _cumsum(ctx: SegmentLowering, node: fx.Node) -> Val:
    """The running sum along ``dim`` as a recurrence: ``out[0] = x[0]``, ``out[i + 1] = out[i] + x[i + 1]``
    (affine), in order, accumulated in :func:`.acc_dtype` (float32 sums differ from eager's in the last
    bits: a 6-element float32 column differed by 1e-6)."""
    v = ctx.val(node.args[0])
    shape, out = ctx.out(node)
    if v.rank == 0:
        raise LoweringError("cumsum of a 0-d tensor runs in eager")
    dim = as_int(node.args[1])
    dim = dim + v.rank if dim < 0 else dim
    acc = acc_dtype(out)
    name = ctx.temp(node.name, shape, acc)
    n = shape[dim]

    def at(it: Index, pos: str) -> Index:
        return tuple(pos if d == dim else it[d] for d in range(len(it)))
    ctx.emit(name, tuple("1" if d == dim else e for d, e in enumerate(shape)),
             lambda it, r: cast(v.load(at(it, "0")), v.dtype, acc), index=lambda it: at(it, "0"))
    rest = str(int(n) - 1) if n.isdigit() else f"{n} - 1"
    ctx.emit(name, tuple(rest if d == dim else e for d, e in enumerate(shape)),
             lambda it, r: f"{name}[{', '.join(it)}] + {cast(v.load(at(it, f'{it[dim]} + 1')), v.dtype, acc)}",
             index=lambda it: at(it, f"{it[dim]} + 1"))
    return rounded(array_val(name, shape, acc), out)


@register("aten.var.correction", "aten.var.dim", kind="reduce")
def _var(ctx: SegmentLowering, node: fx.Node) -> Val:
    v = ctx.val(node.args[0])
    shape, out = ctx.out(node)
    if not out.is_floating_point:
        raise LoweringError("var of integers runs in eager")
    dims = _dims(node.args[1] if len(node.args) > 1 else node.kwargs.get("dim"), v.rank)
    corr = _correction(node)
    keepdim = bool(node.kwargs.get("keepdim", False))
    n = _count(v, dims)
    denom = str(max(0, int(n) - corr)) if n.isdigit() else f"({n} - {corr})"
    _, var = _moments(ctx, node.name, v, dims, acc_dtype(out), denom)
    return rounded(Val(shape, var.dtype, lambda it: var.load(_expand_kept(it, v.rank, dims, keepdim))), out)


def _correction(node: fx.Node) -> Number:
    """The divisor's correction of a variance: ``correction`` (default 1), or 1 or 0 from ``unbiased``
    (default true) for ``var.dim``."""
    if str(node.target) == "aten.var.dim":
        return 1 if (node.args[2] if len(node.args) > 2 else node.kwargs.get("unbiased", True)) else 0
    corr = node.kwargs.get("correction", 1)
    return 1 if corr is None else as_number(corr)


def _expand_kept(it: Index, rank: int, dims: Sequence[int], keepdim: bool) -> Index:
    """Index of a keepdim-shaped moment array from the iterators of an output (keepdim or not)."""
    if keepdim:
        return tuple("0" if d in dims else it[d] for d in range(rank))
    out, k = [], 0
    for d in range(rank):
        if d in dims:
            out.append("0")
        else:
            out.append(it[k])
            k += 1
    return tuple(out)


def _moments(ctx: SegmentLowering, base: str, v: Val, dims: Sequence[int], dtype: torch.dtype,
             denom: str | None = None) -> tuple[Val, Val]:
    """Mean and variance (sum of squares over ``denom``, default the count) of ``v`` over ``dims``, in
    arrays of the keepdim shape and type ``dtype`` (the accumulation type)."""
    kshape = tuple("1" if d in dims else v.shape[d] for d in range(v.rank))
    n = _count(v, dims)
    mname = ctx.temp(base + "_mean", kshape, dtype)
    reduce_into(ctx, mname, v, dims, True, init=None, combine=lambda a, b: f"{a} + {b}", acc=dtype)
    ctx.emit(mname, kshape, lambda it, r: f"{mname}[{', '.join(it) or '0'}] / {n}")
    mean = array_val(mname, kshape, dtype)
    centred = Val(v.shape, dtype, lambda idx: f"({cast(v.load(idx), v.dtype, dtype)} - "
                                              f"{mean.load(tuple('0' if d in dims else idx[d] for d in range(v.rank)))})",
                  ops=v.ops + 1)
    vname = ctx.temp(base + "_m2", kshape, dtype)
    reduce_into(ctx, vname, centred, dims, True, init=None, combine=lambda a, b: f"{a} + {b}", acc=dtype,
                value=lambda t: f"{t} * {t}")
    ctx.emit(vname, kshape, lambda it, r: f"{vname}[{', '.join(it) or '0'}] / {denom or n}")
    return mean, array_val(vname, kshape, dtype)


def _softmax_parts(ctx: SegmentLowering, node: fx.Node, store_exp: bool = False
                   ) -> tuple[Val, Val, Val, int, torch.dtype]:
    """Max, shifted input and exp-sum along the softmax dimension, all in the accumulation type (the
    caller rounds its result to the output's type, also returned); with ``store_exp`` the exponentials
    are stored once (an array instead of a second ``exp`` per element) and returned in place of the
    shifted input."""
    v = ctx.val(node.args[0])
    _, out = ctx.out(node)
    dim = as_int(node.args[1])
    dim = dim + v.rank if dim < 0 else dim
    if not out.is_floating_point:
        raise LoweringError("softmax of integers runs in eager")
    dims = [dim] if v.rank else []
    kshape = tuple("1" if d == dim else v.shape[d] for d in range(v.rank))
    acc = acc_dtype(out)
    mname = ctx.temp(node.name + "_max", kshape, acc)
    reduce_into(ctx, mname, v, dims, True, init=lambda first: first, combine=nan_max, acc=acc)
    m = array_val(mname, kshape, acc)

    def at(idx: Index) -> Index:
        return tuple("0" if d == dim else idx[d] for d in range(v.rank))
    shifted = Val(v.shape, acc, lambda idx: f"({cast(v.load(idx), v.dtype, acc)} - {m.load(at(idx))})",
                  ops=v.ops + 1)
    sname = ctx.temp(node.name + "_sum", kshape, acc)
    if store_exp:
        ename = ctx.temp(node.name + "_exp", v.shape, acc)
        ctx.emit(ename, v.shape, lambda it, r: f"exp({shifted.load(it)})")
        shifted = array_val(ename, v.shape, acc)
        reduce_into(ctx, sname, shifted, dims, True, init=None, combine=lambda a, b: f"{a} + {b}", acc=acc)
    else:
        reduce_into(ctx, sname, shifted, dims, True, init=None, combine=lambda a, b: f"{a} + {b}", acc=acc,
                    value=lambda t: f"exp({t})")
    return shifted, array_val(sname, kshape, acc), m, dim, out


@register("aten._softmax.default", "aten.softmax.int", kind="reduce")
def _softmax(ctx: SegmentLowering, node: fx.Node) -> Val:
    """Exponentials times the reciprocal of their sum (ATen's CPU formula: a multiplication per element
    instead of a division).  The reciprocal is written inline, not as a statement of its own: it does not
    change along the row, so the C compiler computes it once per row, and a statement more would cut
    attention's program in two (``MAX_STATEMENTS``)."""
    exps, s, _, dim, out = _softmax_parts(ctx, node, store_exp=True)
    rank = exps.rank

    def load(idx: Index) -> str:
        return f"({exps.load(idx)} * (1 / {s.load(tuple('0' if d == dim else idx[d] for d in range(rank)))}))"
    return rounded(Val(exps.shape, exps.dtype, load, ops=2), out)


@register("aten._log_softmax.default", "aten.log_softmax.int", kind="reduce")
def _log_softmax(ctx: SegmentLowering, node: fx.Node) -> Val:
    shifted, s, _, dim, out = _softmax_parts(ctx, node)
    rank = shifted.rank

    def load(idx: Index) -> str:
        return f"({shifted.load(idx)} - log({s.load(tuple('0' if d == dim else idx[d] for d in range(rank)))}))"
    return rounded(Val(shifted.shape, shifted.dtype, load, ops=shifted.ops + 2), out)


@register("aten.native_layer_norm.default", kind="reduce")
def _layer_norm(ctx: SegmentLowering, node: fx.Node) -> tuple[Val, Val, Val]:
    """Normalized ``x`` (times the weight, plus the bias), mean and reciprocal standard deviation, each
    computed in the accumulation type and rounded to the output's."""
    x = ctx.val(node.args[0])
    shape, out = ctx.out(node, 0)
    nshape = as_list(node.args[1])
    w, b = node.args[2], node.args[3]
    eps = as_float(node.args[4])
    if not out.is_floating_point or out != x.dtype:
        raise LoweringError("layer norm of this dtype runs in eager")
    dims = list(range(x.rank - len(nshape), x.rank))
    acc = acc_dtype(out)
    mean, var = _moments(ctx, node.name, x, dims, acc)
    kshape = mean.shape
    rname = ctx.temp(node.name + "_rstd", kshape, acc)
    ctx.emit(rname, kshape, lambda it, r: f"1 / sqrt({var.load(it)} + {eps!r})")
    rstd = array_val(rname, kshape, acc)
    wv = ctx.val(w) if isinstance(w, fx.Node) else None
    bv = ctx.val(b) if isinstance(b, fx.Node) else None
    off = x.rank - len(nshape)

    def load(idx: Index) -> str:
        k = tuple("0" if d in dims else idx[d] for d in range(x.rank))
        e = f"({cast(x.load(idx), x.dtype, acc)} - {mean.load(k)}) * {rstd.load(k)}"
        if wv is not None:
            e = f"{e} * {cast(wv.load(idx[off:]), wv.dtype, acc)}"
        if bv is not None:
            e = f"{e} + {cast(bv.load(idx[off:]), bv.dtype, acc)}"
        return f"({e})"
    mshape, mtype = ctx.out(node, 1)
    return (rounded(Val(shape, acc, load, ops=x.ops + 4), out), _reshaped(rounded(mean, mtype), mshape),
            _reshaped(rounded(rstd, mtype), mshape))


def _reshaped(v: Val, shape: tuple[str, ...]) -> Val:
    """The same elements with the (equal-rank, same-extent) shape of the meta data."""
    if v.shape == shape:
        return v
    return Val(shape, v.dtype, v.load, array=v.array if len(shape) == v.rank else None, ops=v.ops)
