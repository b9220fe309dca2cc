"""Elementwise operations, reductions and softmax of TensorFlow as ATen calls (TensorFlow's operands of a
binary operation have one dtype, and its broadcasting is numpy's, as torch's)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .jax_graph import Const, GraphBuilder, Operand, dtype_of
from .tf_convert import torch_dtype
from .tf_rules import Declined, TfOp, axis, rule

aten = torch.ops.aten

UNARY: dict[str, Any] = {
    "Relu": aten.relu.default, "Sigmoid": aten.sigmoid.default, "Tanh": aten.tanh.default,
    "Exp": aten.exp.default, "Log": aten.log.default, "Neg": aten.neg.default, "Sqrt": aten.sqrt.default,
    "Rsqrt": aten.rsqrt.default, "Erf": aten.erf.default, "Abs": aten.abs.default, "Floor": aten.floor.default,
    "Ceil": aten.ceil.default, "Sin": aten.sin.default, "Cos": aten.cos.default, "Log1p": aten.log1p.default,
    "Expm1": aten.expm1.default, "Reciprocal": aten.reciprocal.default, "Inv": aten.reciprocal.default,
    "Sign": aten.sign.default, "LogicalNot": aten.logical_not.default, "IsFinite": aten.isfinite.default,
}

BINARY: dict[str, Any] = {
    "Add": aten.add.Tensor, "AddV2": aten.add.Tensor, "Sub": aten.sub.Tensor, "Mul": aten.mul.Tensor,
    "RealDiv": aten.div.Tensor, "Maximum": aten.maximum.default, "Minimum": aten.minimum.default,
    "Equal": aten.eq.Tensor, "NotEqual": aten.ne.Tensor, "Less": aten.lt.Tensor, "LessEqual": aten.le.Tensor,
    "Greater": aten.gt.Tensor, "GreaterEqual": aten.ge.Tensor, "LogicalAnd": aten.logical_and.default,
    "LogicalOr": aten.logical_or.default,
}
#: Binary ops whose second operand may be a Python scalar, and the overload that takes it.
_WITH_SCALAR = {aten.add.Tensor: aten.add.Tensor, aten.sub.Tensor: aten.sub.Tensor, aten.mul.Tensor: aten.mul.Tensor,
                aten.div.Tensor: aten.div.Tensor, aten.eq.Tensor: aten.eq.Scalar, aten.ne.Tensor: aten.ne.Scalar,
                aten.lt.Tensor: aten.lt.Scalar, aten.le.Tensor: aten.le.Scalar, aten.gt.Tensor: aten.gt.Scalar,
                aten.ge.Tensor: aten.ge.Scalar}


def binary(b: GraphBuilder, target: Any, x: Operand, y: Operand) -> Operand:
    """``target(x, y)``: a Python scalar second operand where the op takes one, else 0-d tensors."""
    if isinstance(y, Const) and target in _WITH_SCALAR:
        return b.call(_WITH_SCALAR[target], b.tensor(x), y.value)
    return b.call(target, b.tensor(x), b.tensor(y))


@rule(*UNARY)
def _unary(e: TfOp) -> Sequence[Operand]:
    return [e.b.call(UNARY[e.type], e.node(0))]


@rule(*BINARY)
def _binary(e: TfOp) -> Sequence[Operand]:
    if e.type == "RealDiv" and not e.out.dtype.is_floating_point:
        raise Declined("RealDiv of integers")
    return [binary(e.b, BINARY[e.type], e.arg(0), e.arg(1))]


@rule("Square")
def _square(e: TfOp) -> Sequence[Operand]:
    x = e.node(0)
    return [e.b.call(aten.mul.Tensor, x, x)]


@rule("SquaredDifference")
def _squared_difference(e: TfOp) -> Sequence[Operand]:
    d = binary(e.b, aten.sub.Tensor, e.arg(0), e.arg(1))
    return [e.b.call(aten.mul.Tensor, d, d)]


@rule("Pow")
def _pow(e: TfOp) -> Sequence[Operand]:
    if not e.out.dtype.is_floating_point:
        raise Declined("Pow of integers")
    y = e.arg(1)
    if isinstance(y, Const):
        return [e.b.call(aten.pow.Tensor_Scalar, e.node(0), y.value)]
    return [e.b.call(aten.pow.Tensor_Tensor, e.node(0), e.b.tensor(y))]


@rule("Relu6")
def _relu6(e: TfOp) -> Sequence[Operand]:
    return [e.b.call(aten.hardtanh.default, e.node(0), 0.0, 6.0)]


@rule("LeakyRelu")
def _leaky_relu(e: TfOp) -> Sequence[Operand]:
    x = e.node(0)
    neg = e.b.call(aten.mul.Tensor, x, float(e.attr("alpha", 0.2)))
    return [e.b.call(aten.where.self, e.b.call(aten.gt.Scalar, x, 0), x, neg)]


@rule("Softmax", "LogSoftmax")
def _softmax(e: TfOp) -> Sequence[Operand]:
    fn = aten._softmax.default if e.type == "Softmax" else aten._log_softmax.default
    return [e.b.call(fn, e.node(0), -1, False)]


@rule("Select", "SelectV2")
def _select(e: TfOp) -> Sequence[Operand]:
    b = e.b
    cond, x, y = e.node(0), e.node(1), e.node(2)
    rank = len(e.out.shape)
    if e.type == "Select" and len(e.shape(0)) == 1 and rank > 1:  # a condition per row
        cond = b.call(aten.reshape.default, cond, [e.shape(0)[0]] + [1] * (rank - 1))
    return [b.call(aten.where.self, cond, x, y)]


@rule("Cast")
def _cast(e: TfOp) -> Sequence[Operand]:
    dtype = torch_dtype(e.attr("DstT"))
    if dtype_of(e.arg(0)) == dtype:
        return [e.arg(0)]
    return [e.b.call(aten._to_copy.default, e.node(0), dtype=dtype)]


@rule("AddN")
def _add_n(e: TfOp) -> Sequence[Operand]:
    acc = e.node(0)
    for k in range(1, e.arity):
        acc = e.b.call(aten.add.Tensor, acc, e.node(k))
    return [acc]


def _reduce_dims(e: TfOp) -> list[int]:
    rank = len(e.shape(0))
    return sorted({axis(a, rank) for a in e.ints(1)})


def _keep(e: TfOp) -> bool:
    return bool(e.attr("keep_dims", False))


REDUCTIONS: dict[str, Callable[[GraphBuilder, Operand, list[int], bool], Operand]] = {
    "Sum": lambda b, x, d, k: b.call(aten.sum.dim_IntList, x, d, k, dtype=dtype_of(x)),
    "Mean": lambda b, x, d, k: b.call(aten.mean.dim, x, d, k),
    "Max": lambda b, x, d, k: b.call(aten.amax.default, x, d, k),
    "Min": lambda b, x, d, k: b.call(aten.amin.default, x, d, k),
    "All": lambda b, x, d, k: b.call(aten.all.dims, x, d, k),
    "Any": lambda b, x, d, k: b.call(aten.any.dims, x, d, k),
}


@rule(*REDUCTIONS)
def _reduce(e: TfOp) -> Sequence[Operand]:
    dims = _reduce_dims(e)
    x = e.node(0)
    if not dims:  # TensorFlow reduces over no axis: the value itself
        return [x]
    if e.type == "Mean" and not e.out.dtype.is_floating_point:
        raise Declined("Mean of integers")
    return [REDUCTIONS[e.type](e.b, x, dims, _keep(e))]


@rule("Prod")
def _prod(e: TfOp) -> Sequence[Operand]:
    y: Operand = e.node(0)
    for d in reversed(_reduce_dims(e)):  # one dimension at a time, from the last
        y = e.b.call(aten.prod.dim_int, y, d, _keep(e), dtype=e.out.dtype)
    return [y]


@rule("ArgMax", "ArgMin")
def _argmax(e: TfOp) -> Sequence[Operand]:
    fn = aten.argmax.default if e.type == "ArgMax" else aten.argmin.default
    y = e.b.call(fn, e.node(0), axis(e.ints(1)[0], len(e.shape(0))), False)
    if e.out.dtype != torch.int64:
        y = e.b.call(aten._to_copy.default, y, dtype=e.out.dtype)
    return [y]


# gradients (tf.GradientTape): the operations TensorFlow's own gradients emit
@rule("ReluGrad")
def _relu_grad(e: TfOp) -> Sequence[Operand]:
    g, f = e.node(0), e.node(1)
    zero = e.b.tensor(Const(0.0, e.out.dtype))
    return [e.b.call(aten.where.self, e.b.call(aten.gt.Scalar, f, 0), g, zero)]


@rule("SigmoidGrad", "TanhGrad")
def _sigmoid_grad(e: TfOp) -> Sequence[Operand]:
    b = e.b
    y, dy = e.node(0), e.node(1)
    if e.type == "SigmoidGrad":  # dy * y * (1 - y)
        slope = b.call(aten.mul.Tensor, y, b.call(aten.rsub.Scalar, y, 1))
    else:  # dy * (1 - y * y)
        slope = b.call(aten.rsub.Scalar, b.call(aten.mul.Tensor, y, y), 1)
    return [b.call(aten.mul.Tensor, dy, slope)]


@rule("BiasAddGrad")
def _bias_add_grad(e: TfOp) -> Sequence[Operand]:
    rank = len(e.shape(0))
    channel = 1 if e.attr("data_format", "NHWC") == "NCHW" else rank - 1
    dims = [d for d in range(rank) if d != channel]
    return [e.b.call(aten.sum.dim_IntList, e.node(0), dims, False, dtype=e.out.dtype)]
