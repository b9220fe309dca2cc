"""Elementwise JAX primitives as ATen calls.

A jaxpr's binary operations take operands of one dtype (JAX promotes before), so torch's type promotion
changes nothing: a scalar literal is passed as a Python number where the ATen op takes one, else as a
0-d tensor.  ``max(x, c)`` with a literal ``c`` is ``clamp_min`` (NaN propagates in both).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.fx as fx

from .jax_graph import Const, GraphBuilder, Operand, dtype_of
from .jax_rules import Declined, Eqn, rule, torch_dtype

aten = torch.ops.aten

_UNARY = {
    "neg": aten.neg.default, "exp": aten.exp.default, "log": aten.log.default, "tanh": aten.tanh.default,
    "logistic": aten.sigmoid.default, "erf": aten.erf.default, "sqrt": aten.sqrt.default,
    "rsqrt": aten.rsqrt.default, "abs": aten.abs.default, "floor": aten.floor.default, "ceil": aten.ceil.default,
    "sign": aten.sign.default, "sin": aten.sin.default, "cos": aten.cos.default, "log1p": aten.log1p.default,
    "expm1": aten.expm1.default, "is_finite": aten.isfinite.default, "exp2": aten.exp2.default,
    "erfc": aten.erfc.default,
}

#: Binary primitives whose ATen op has a ``Scalar`` overload (the second operand a Python number).
_BINARY = {
    "add": (aten.add.Tensor, aten.add.Scalar), "sub": (aten.sub.Tensor, aten.sub.Scalar),
    "mul": (aten.mul.Tensor, aten.mul.Scalar),
    "eq": (aten.eq.Tensor, aten.eq.Scalar), "ne": (aten.ne.Tensor, aten.ne.Scalar),
    "lt": (aten.lt.Tensor, aten.lt.Scalar), "le": (aten.le.Tensor, aten.le.Scalar),
    "gt": (aten.gt.Tensor, aten.gt.Scalar), "ge": (aten.ge.Tensor, aten.ge.Scalar),
}
#: A constant first operand: the same comparison with the operands swapped.
_SWAPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne", "add": "add", "mul": "mul"}


def _tensor_first(b: GraphBuilder, e: Eqn, name: str) -> tuple[str, Operand, Operand]:
    x, y = e.args
    if isinstance(x, Const) and isinstance(y, fx.Node) and name in _SWAPPED:
        return _SWAPPED[name], y, x
    return name, b.tensor(x), y


@rule(*_UNARY)
def _unary(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    if e.primitive == "sign" and e.out.dtype == torch.bool:
        raise Declined("sign of booleans")
    return [b.call(_UNARY[e.primitive], b.tensor(e.args[0]))]


@rule(*_BINARY)
def _binary(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    if e.primitive == "sub" and isinstance(e.args[0], Const) and isinstance(e.args[1], fx.Node):
        return [b.call(aten.rsub.Scalar, e.args[1], e.args[0].value)]
    name, x, y = _tensor_first(b, e, e.primitive)
    tensor_op, scalar_op = _BINARY[name]
    if isinstance(y, Const):
        return [b.call(scalar_op, x, y.value)]
    return [b.call(tensor_op, x, y)]


@rule("square")
def _square(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    x = b.tensor(e.args[0])
    return [b.call(aten.mul.Tensor, x, x)]


@rule("div")
def _div(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    x, y = b.tensor(e.args[0]), e.args[1]
    other = y.value if isinstance(y, Const) else y
    if e.out.dtype.is_floating_point:
        return [b.call(aten.div.Tensor, x, other)]
    if e.out.dtype == torch.bool:
        raise Declined("division of booleans")
    return [b.call(aten.div.Tensor_mode, x, b.tensor(y), rounding_mode="trunc")]  # JAX rounds toward 0


@rule("rem")
def _rem(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    x, y = b.tensor(e.args[0]), e.args[1]
    return [b.call(aten.fmod.Tensor, x, b.tensor(y))]  # the sign of the dividend, as lax.rem


@rule("max", "min")
def _extreme(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    x, y = e.args
    if isinstance(x, Const) and isinstance(y, fx.Node):
        x, y = y, x
    if isinstance(y, Const) and e.out.dtype != torch.bool:
        op = aten.clamp_min.default if e.primitive == "max" else aten.clamp_max.default
        return [b.call(op, b.tensor(x), y.value)]
    op = aten.maximum.default if e.primitive == "max" else aten.minimum.default
    return [b.call(op, b.tensor(x), b.tensor(y))]


@rule("clamp")
def _clamp(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    lo, x, hi = e.args
    if isinstance(lo, Const) and isinstance(hi, Const):
        return [b.call(aten.clamp.default, b.tensor(x), lo.value, hi.value)]
    return [b.call(aten.clamp.Tensor, b.tensor(x), b.tensor(lo), b.tensor(hi))]


@rule("integer_pow")
def _integer_pow(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    y = int(e.params["y"])
    if y < 0 and not e.out.dtype.is_floating_point:
        raise Declined("negative integer power of integers")
    return [b.call(aten.pow.Tensor_Scalar, b.tensor(e.args[0]), y)]


@rule("pow")
def _pow(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    x, y = e.args
    if isinstance(y, Const):
        return [b.call(aten.pow.Tensor_Scalar, b.tensor(x), y.value)]
    if dtype_of(y) != dtype_of(x):
        raise Declined("pow with an exponent of another dtype")
    return [b.call(aten.pow.Tensor_Tensor, b.tensor(x), y)]


_LOGICAL = {"and": (aten.logical_and.default, aten.bitwise_and.Tensor),
            "or": (aten.logical_or.default, aten.bitwise_or.Tensor),
            "xor": (aten.logical_xor.default, aten.bitwise_xor.Tensor)}


@rule("and", "or", "xor")
def _logical(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    logical, bitwise = _LOGICAL[e.primitive]
    op = logical if e.out.dtype == torch.bool else bitwise
    return [b.call(op, b.tensor(e.args[0]), b.tensor(e.args[1]))]


@rule("not")
def _not(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    op = aten.logical_not.default if e.out.dtype == torch.bool else aten.bitwise_not.default
    return [b.call(op, b.tensor(e.args[0]))]


@rule("select_n")
def _select_n(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    """``cases[which]``: for a boolean ``which``, ``where(which, cases[1], cases[0])``; for an integer one,
    a chain of ``where(which == k, cases[k], ...)``."""
    which, *cases = e.args
    pred = b.tensor(which)
    result = b.tensor(cases[-1])
    if dtype_of(which) == torch.bool:
        if len(cases) != 2:
            raise Declined("select_n with a boolean predicate and more than two cases")
        return [b.call(aten.where.self, pred, result, b.tensor(cases[0]))]
    for k in range(len(cases) - 2, -1, -1):
        hit = b.call(aten.eq.Scalar, pred, k)
        result = b.call(aten.where.self, hit, b.tensor(cases[k]), result)
    return [result]


@rule("convert_element_type")
def _convert(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    x = e.args[0]
    dtype = torch_dtype(e.params["new_dtype"])
    if isinstance(x, Const):  # folded: constants stay Python numbers for the ops that read them
        return [_converted_const(x, dtype)]
    if dtype == dtype_of(x):
        return [x]
    return [b.call(aten._to_copy.default, x, dtype=dtype)]


def _converted_const(x: Const, dtype: torch.dtype) -> Const:
    value = torch.tensor(x.value, dtype=x.dtype).to(dtype).item()
    return Const(value, dtype)


@rule("stop_gradient", "copy", "copy_p", "device_put", "sharding_constraint", "optimization_barrier", "reduce_precision")
def _identity(b: GraphBuilder, e: Eqn) -> Sequence[Operand]:
    if e.primitive == "reduce_precision" and (e.params.get("exponent_bits"), e.params.get("mantissa_bits")) != \
            _bits(e.out.dtype):
        raise Declined("reduce_precision to a narrower type")
    if len(e.args) != len(e.outs):
        raise Declined(f"{e.primitive} with {len(e.args)} operands and {len(e.outs)} results")
    return list(e.args)


def _bits(dtype: torch.dtype) -> tuple[int, int] | None:
    return {torch.float32: (8, 23), torch.float64: (11, 52), torch.float16: (5, 10), torch.bfloat16: (8, 7)}.get(dtype)
