"""Shape primitives of JAX as ATen views and copies: broadcasting, reshapes, transposes, slices,
concatenation, padding, ``iota``."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .jax_graph import Const, GraphBuilder, Operand, shape_of
from .jax_rules import Declined, Eqn, rule, torch_dtype

aten = torch.ops.aten


def reshape(b: GraphBuilder, x: Operand, shape: Sequence[int]) -> Operand:
    """``x`` reshaped (no node when the shape does not change)."""
    node = b.tensor(x)
    if shape_of(node) == tuple(shape):
        return node
    return b.call(aten.reshape.default, node, [int(s) for s in shape])


def permute(b: GraphBuilder, x: Operand, perm: Sequence[int]) -> Operand:
    """``x`` with its dimensions in the order ``perm`` (no node for the identity)."""
    if list(perm) == list(range(len(perm))):
        return x
    return b.call(aten.permute.default, b.tensor(x), [int(p) for p in perm])


@rule("broadcast_in_dim")
def _broadcast_in_dim(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    x = e.args[0]
    shape = [int(s) for s in e.params["shape"]]
    if isinstance(x, Const):
        return [b.call(aten.full.default, shape, x.value, dtype=x.dtype)]
    dims = [int(d) for d in e.params["broadcast_dimensions"]]
    src = shape_of(x)
    ones = [1] * len(shape)
    for d, s in zip(dims, src):
        ones[d] = s
    y = reshape(b, x, ones)
    if ones == shape:
        return [y]
    return [b.call(aten.expand.default, y, shape)]


@rule("reshape")
def _reshape(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    if e.params.get("dimensions") is not None:
        raise Declined("reshape with dimensions (a transposition first)")
    return [reshape(b, e.args[0], e.out.shape)]


@rule("squeeze", "expand_dims")
def _squeeze(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    return [reshape(b, e.args[0], e.out.shape)]


@rule("transpose")
def _transpose(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    return [permute(b, e.args[0], e.params["permutation"])]


@rule("slice")
def _slice(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    x = b.tensor(e.args[0])
    starts, limits = e.params["start_indices"], e.params["limit_indices"]
    strides = e.params.get("strides") or [1] * len(starts)
    shape = shape_of(x)
    y: Operand = x
    for d, (lo, hi, st) in enumerate(zip(starts, limits, strides)):
        if (int(lo), int(hi), int(st)) != (0, shape[d], 1):
            y = b.call(aten.slice.Tensor, y, d, int(lo), int(hi), int(st))
    return [y]


@rule("concatenate")
def _concatenate(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    return [b.call(aten.cat.default, [b.tensor(a) for a in e.args], int(e.params["dimension"]))]


@rule("pad")
def _pad(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    x, value = e.args
    if not isinstance(value, Const):
        raise Declined("pad with a padding value computed at run time")
    config = [(int(lo), int(hi), int(mid)) for lo, hi, mid in e.params["padding_config"]]
    if any(mid for _, _, mid in config):
        raise Declined("interior padding")
    pads: list[int] = []
    for lo, hi, _ in reversed(config):  # the last dimension first, as constant_pad_nd reads them
        pads += [lo, hi]
    if not any(pads):
        return [x]
    return [b.call(aten.constant_pad_nd.default, b.tensor(x), pads, value.value)]


@rule("iota")
def _iota(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    dtype = torch_dtype(e.params["dtype"])
    shape = [int(s) for s in e.params["shape"]]
    dim = int(e.params["dimension"])
    line = b.call(aten.arange.start_step, 0, shape[dim], 1, dtype=dtype)
    ones = [1] * len(shape)
    ones[dim] = shape[dim]
    y = reshape(b, line, ones)
    return [y if ones == shape else b.call(aten.expand.default, y, shape)]


@rule("split")
def _split(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    x = b.tensor(e.args[0])
    axis = int(e.params["axis"])
    outs: list[Operand] = []
    start = 0
    for size in e.params["sizes"]:
        outs.append(b.call(aten.slice.Tensor, x, axis, start, start + int(size), 1))
        start += int(size)
    return outs
