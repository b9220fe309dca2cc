"""``dot_general`` as a (batched) matrix product and ``conv_general_dilated`` as an ATen convolution.

``dot_general`` puts each operand in the order (batch, free, contracted) or (batch, contracted, free),
flattens each group into one dimension and calls ``mm`` or ``bmm``; the product's (batch, lhs free, rhs
free) order is ``dot_general``'s own.  A convolution's operands are transposed to NCHW / OIHW and its
result back to the layout of ``dimension_numbers``; unequal padding on the two sides of a dimension is
an explicit ``constant_pad_nd`` first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .jax_graph import GraphBuilder, Operand, dtype_of, shape_of
from .jax_ops_shape import permute, reshape
from .jax_rules import Declined, Eqn, rule, torch_dtype

aten = torch.ops.aten


def _converted(b: GraphBuilder, x: Operand, dtype: torch.dtype) -> Operand:
    if dtype_of(x) == dtype:
        return x
    return b.call(aten._to_copy.default, b.tensor(x), dtype=dtype)


def _result_dtype(e: Eqn) -> torch.dtype:
    preferred = e.params.get("preferred_element_type")
    return torch_dtype(preferred) if preferred is not None else e.out.dtype


@rule("dot_general")
def _dot_general(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    (lc, rc), (lb, rb) = e.params["dimension_numbers"]
    dtype = _result_dtype(e)
    if not (dtype.is_floating_point or dtype in (torch.int32, torch.int64)):
        raise Declined(f"dot_general producing {dtype}")
    lhs, rhs = (b.tensor(_converted(b, a, dtype)) for a in e.args)
    ls, rs = shape_of(lhs), shape_of(rhs)
    lc, rc, lb, rb = ([int(d) for d in ds] for ds in (lc, rc, lb, rb))
    lf = [d for d in range(len(ls)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rs)) if d not in rc and d not in rb]
    batch = [ls[d] for d in lb]
    m, k, n = math.prod(ls[d] for d in lf), math.prod(ls[d] for d in lc), math.prod(rs[d] for d in rf)
    nb = math.prod(batch)
    left = reshape(b, permute(b, lhs, lb + lf + lc), [nb, m, k] if lb else [m, k])
    right = reshape(b, permute(b, rhs, rb + rc + rf), [nb, k, n] if rb else [k, n])
    prod = b.call(aten.bmm.default if lb else aten.mm.default, left, right)
    return [reshape(b, prod, e.out.shape)]


def _inverse(perm: Sequence[int]) -> list[int]:
    inv = [0] * len(perm)
    for k, p in enumerate(perm):
        inv[p] = k
    return inv


@rule("conv_general_dilated")
def _conv(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    p = e.params
    if any(int(d) != 1 for d in p["lhs_dilation"]):
        raise Declined("a convolution with input dilation (a transposed convolution)")
    if int(p.get("batch_group_count", 1)) != 1:
        raise Declined("a convolution with batch groups")
    dtype = _result_dtype(e)
    if not dtype.is_floating_point:
        raise Declined(f"a convolution producing {dtype}")
    dn = p["dimension_numbers"]
    lhs_spec, rhs_spec, out_spec = (list(dn.lhs_spec), list(dn.rhs_spec), list(dn.out_spec)) if dn is not None \
        else (None, None, None)
    x = b.tensor(_converted(b, e.args[0], dtype))
    w = b.tensor(_converted(b, e.args[1], dtype))
    rank = len(shape_of(x))
    lhs_spec, rhs_spec, out_spec = (s or list(range(rank)) for s in (lhs_spec, rhs_spec, out_spec))
    x, w = b.tensor(permute(b, x, lhs_spec)), b.tensor(permute(b, w, rhs_spec))
    strides = [int(v) for v in p["window_strides"]]
    padding = [(int(lo), int(hi)) for lo, hi in p["padding"]]
    if any(lo < 0 or hi < 0 for lo, hi in padding):
        raise Declined("a convolution with negative padding")
    sym, skip = _symmetric(padding, strides)
    y = b.call(aten.convolution.default, x, w, None, strides, sym,
               [int(d) for d in p["rhs_dilation"]], False, [0] * (rank - 2), int(p["feature_group_count"]))
    nchw = [e.out.shape[d] for d in out_spec]
    for d, first in enumerate(skip):
        if first or shape_of(y)[d + 2] != nchw[d + 2]:
            y = b.call(aten.slice.Tensor, y, d + 2, first, first + nchw[d + 2], 1)
    return [permute(b, y, _inverse(out_spec))]


def _symmetric(padding: list[tuple[int, int]], strides: list[int]) -> tuple[list[int], list[int]]:
    """Equal padding on both sides of each spatial dimension for the convolution, and the outputs to skip
    at the start: ``lo`` is raised by a multiple of the stride until it covers ``hi`` (the windows keep
    their alignment; the extra outputs on either side are sliced off).  With a zero-padded copy instead
    (``constant_pad_nd``), the gradient of a strided 'SAME' convolution was not scheduled in 9 minutes."""
    sym, skip = [], []
    for (lo, hi), s in zip(padding, strides):
        k = -(-(hi - lo) // s) if hi > lo else 0
        sym.append(lo + s * k)
        skip.append(k)
    return sym, skip
