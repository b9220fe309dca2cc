"""Data-dependent reads: ``aten.embedding``, ``aten.gather``, ``aten.index_select`` and ``aten.index.Tensor``.

Each is one statement whose read of the source has an indirect subscript (:mod:`polytri.ir.indirect`):
``out[i, j] = W[ids[i], j]``.  The index tensors must be inputs of the program (their values are checked
before the kernel runs): one computed by the same program makes the handler ask for a new program at
the node (:meth:`.SegmentLowering.start_program_here`), after which it is an input.  Negative indices
wrap around like Python's for ``index.Tensor`` (``where(v < 0, v + n, v)``, so that the range check
sees the wrapped value), and are out of range for the others, as in eager.
"""

from __future__ import annotations

import ast
import re

import torch
import torch.fx as fx

from .torch_args import as_int, node_arg
from .torch_lower import SegmentLowering, register, tensor_meta
from .torch_values import Index, LoweringError, Val, array_val, broadcast

_READ = re.compile(r"\b(t_\w*)\[")


def _index_value(ctx: SegmentLowering, node: fx.Node, arg: object) -> Val:
    """The integer index tensor ``arg``, read from inputs of the program only."""
    t = tensor_meta(arg)
    if t is None or t.dtype not in (torch.int64, torch.int32):
        raise LoweringError(f"{node.name}: index tensors of dtype {getattr(t, 'dtype', None)} (boolean masks "
                            f"included) run in eager")
    v = ctx.val(arg)
    inputs = {ctx.segment.arrays[n] for n in ctx.segment.inputs if n in ctx.segment.arrays}
    read = set(_READ.findall(v.load(tuple("0" for _ in v.shape))))
    if not read <= inputs:  # computed here: its values are only known once this program has run
        ctx.start_program_here(node)
    return v


def _source(ctx: SegmentLowering, node: fx.Node, arg: object) -> Val:
    """The indexed tensor, readable at any element (stored when it is an expression)."""
    return ctx.readable(ctx.val(arg), f"{node.name}_src")


def _wrapped(text: str, extent: str) -> str:
    """An index that Python-style wraps when negative.  An index that reads no array (an ``arange``
    folded into the subscript) is affine and stays as it is: the bounds proof covers it, and a negative
    value is an error there rather than a wrap."""
    if not any(isinstance(n, ast.Subscript) for n in ast.walk(ast.parse(text, mode="eval"))):
        return text
    return f"where({text} < 0, {text} + {extent}, {text})"


@register("aten.embedding.default", kind="reuse")
def _embedding(ctx: SegmentLowering, node: fx.Node) -> Val:
    """``out[i..., j] = weight[ids[i...], j]``."""
    weight, ids = _source(ctx, node, node.args[0]), _index_value(ctx, node, node.args[1])
    if weight.rank != 2:
        raise LoweringError(f"{node.name}: embedding of a {weight.rank}-d weight runs in eager")
    shape, dtype = ctx.out(node)
    name = ctx.temp(node.name, shape, dtype)

    def rhs(idx: Index, red: Index) -> str:
        return weight.load((f"({ids.load(idx[:-1])})", idx[-1]))
    ctx.emit(name, shape, rhs)
    return array_val(name, shape, dtype)


@register("aten.gather.default", kind="reuse")
def _gather(ctx: SegmentLowering, node: fx.Node) -> Val:
    """``out[i...] = src[i_0, ..., index[i...], ..., i_r]`` along ``dim`` (``sparse_grad`` changes only
    the gradient)."""
    src = _source(ctx, node, node.args[0])
    dim = as_int(node.args[1])
    index = _index_value(ctx, node, node.args[2])
    rank = max(src.rank, 1)
    dim = dim + rank if dim < 0 else dim
    shape, dtype = ctx.out(node)
    if src.rank == 0 or index.rank != src.rank:
        raise LoweringError(f"{node.name}: gather of a 0-d tensor runs in eager")
    name = ctx.temp(node.name, shape, dtype)

    def rhs(idx: Index, red: Index) -> str:
        return src.load(tuple(f"({index.load(idx)})" if k == dim else idx[k] for k in range(src.rank)))
    ctx.emit(name, shape, rhs)
    return array_val(name, shape, dtype)


@register("aten.index_select.default", kind="reuse")
def _index_select(ctx: SegmentLowering, node: fx.Node) -> Val:
    """``out[..., i_d, ...] = src[..., index[i_d], ...]`` along ``dim`` (``index`` is 1-D or 0-d)."""
    src = _source(ctx, node, node.args[0])
    index = _index_value(ctx, node, node.args[2])
    if src.rank == 0 or index.rank > 1:
        raise LoweringError(f"{node.name}: index_select of a 0-d tensor runs in eager")
    dim = as_int(node.args[1]) % src.rank
    shape, dtype = ctx.out(node)
    name = ctx.temp(node.name, shape, dtype)

    def rhs(idx: Index, red: Index) -> str:
        at = index.load((idx[dim],) if index.rank else ())
        return src.load(tuple(f"({at})" if k == dim else idx[k] for k in range(src.rank)))
    ctx.emit(name, shape, rhs)
    return array_val(name, shape, dtype)


@register("aten.index.Tensor", kind="reuse")
def _index(ctx: SegmentLowering, node: fx.Node) -> Val:
    """``src[..., ids_a, ..., ids_b, ...]`` with index tensors (broadcast together) on some dimensions and
    full slices (``None``) on the others, with PyTorch's placement of the indexed dimensions."""
    src = _source(ctx, node, node.args[0])
    given = node.args[1]
    if not isinstance(given, (list, tuple)):
        raise LoweringError(f"{node.name}: index with {given!r} runs in eager")
    entries = list(given) + [None] * (src.rank - len(given))
    indexed = [k for k, e in enumerate(entries) if e is not None]
    if not indexed:
        raise LoweringError(f"{node.name}: index without index tensors runs in eager")
    vals = {k: _index_value(ctx, node, node_arg(entries[k])) for k in indexed}
    shape, dtype = ctx.out(node)
    b_rank = max(vals[k].rank for k in indexed)
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    first = indexed[0] if adjacent else 0  # where the broadcast dimensions go in the result
    b_shape = shape[first:first + b_rank]
    loads = {k: broadcast(vals[k], b_shape) for k in indexed}
    name = ctx.temp(node.name, shape, dtype)

    def rhs(idx: Index, red: Index) -> str:
        b_idx = idx[first:first + b_rank]
        rest = iter(idx[:first] + idx[first + b_rank:])
        subs = tuple(_wrapped(f"({loads[k](b_idx)})", src.shape[k]) if k in loads else next(rest)
                     for k in range(src.rank))
        return src.load(subs)
    ctx.emit(name, shape, rhs)
    return array_val(name, shape, dtype)
