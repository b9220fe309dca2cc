"""Elementwise ATen ops: broadcasting, PyTorch's type promotion, NaN-propagating min/max.

An op on 16-bit floats computes in float32 and rounds once, at its output (:func:`.acc_dtype`), as ATen's
kernels do: ``gelu`` of a bfloat16 tensor rounds its result, not each of its multiplications.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.fx as fx

from .torch_args import Argument, Number, as_number, fake
from .torch_lower import SegmentLowering, register
from .torch_values import Index, Load, LoweringError, Val, acc_dtype, broadcast, cast, literal

Fn = Callable[..., str]


def _kw(node: fx.Node, name: str, pos: int, default: Argument = None) -> Argument:
    if name in node.kwargs:
        return node.kwargs[name]
    return node.args[pos] if len(node.args) > pos else default


def pointwise(ctx: SegmentLowering, node: fx.Node, fn: Fn, args: Sequence[Argument], *,
              compute: torch.dtype | None = None, result: torch.dtype | None = None,
              casts: Sequence[torch.dtype | None] = ()) -> Val:
    """An elementwise node: ``fn`` of the operand texts, each tensor cast to the compute dtype (the
    output's unless given), then to that type's :func:`.acc_dtype`, which ``fn`` computes in; ``result``
    is the dtype ``fn`` yields (the accumulation type of the compute dtype unless given).  A Python number
    meeting 16-bit floats is rounded to their type first (the IR's rule for a weak operand, and eager's
    for ``add`` and ``sub``), then widened."""
    shape, out = ctx.out(node)
    comp = compute or out
    wide = acc_dtype(comp)
    loads: list[Load] = []
    ops = 1
    for k, a in enumerate(args):
        if isinstance(a, fx.Node):
            v = ctx.val(a)
            to = (casts[k] if k < len(casts) else None) or comp
            if v.wide is not None and to == v.dtype and ctx.options.float32_chains:
                loads.append(broadcast(Val(v.shape, acc_dtype(v.dtype), v.wide), shape))  # not rounded
            else:
                loads.append(_widened(broadcast(v, shape), v.dtype, to))
            ops += v.ops
        else:
            text = literal(a)
            if wide != comp:
                text = cast(cast(text, torch.float64, comp), comp, wide)
            loads.append(_constant(text))
    res = result or wide

    def computed(idx: Index) -> str:
        return fn(*(ld(idx) for ld in loads))

    def load(idx: Index) -> str:
        return cast(computed(idx), res, out)
    chain = res == torch.float32 and out in (torch.float16, torch.bfloat16)
    return Val(shape, out, load, ops=ops, wide=computed if chain else None)


def _widened(ld: Load, dtype: torch.dtype, to: torch.dtype) -> Load:
    """``ld`` (of ``dtype``) converted to ``to``, then to the type ``to`` computes in."""
    return lambda idx: cast(cast(ld(idx), dtype, to), to, acc_dtype(to))


def _constant(text: str) -> Load:
    """The same text at every index."""
    return lambda idx: text


def _promoted(a: Argument, b: Argument) -> torch.dtype:
    """The dtype PyTorch's type promotion gives to the operands ``a`` and ``b`` (tensors or numbers)."""
    return torch.result_type(_example(a), _example(b))


def _example(x: Argument) -> torch.Tensor | Number:
    """The example value of an operand: the fake tensor of a node, a number as it is."""
    return fake(x) if isinstance(x, fx.Node) else as_number(x)


def nan_max(a: str, b: str) -> str:
    """``maximum``: NaN when either operand is NaN, as in PyTorch: the language's ``nanmax``, computed as
    ``a > b ? a : (a is NaN ? a : b)`` (:mod:`polytri.ir.reduction`).  The form ``a is NaN ? a : (b is NaN
    ? b : max(a, b))`` gives the same values but costs more instructions per vector: a row sum and row
    maximum of a 2048 x 2048 float32 array took 0.76-0.94 ms with it against 0.43-0.52 ms (the generated C
    alone, 4 interleaved runs, 2 threads)."""
    return f"nanmax({a}, {b})"


def nan_min(a: str, b: str) -> str:
    """``minimum``, like :func:`nan_max`: the language's ``nanmin``."""
    return f"nanmin({a}, {b})"


def _binary(sym: str) -> Fn:
    return lambda a, b: f"({a} {sym} {b})"


def _arith(sym: str, *, alpha: bool = False, reverse: bool = False) -> Callable[[SegmentLowering, fx.Node], Val]:
    def lower(ctx: SegmentLowering, node: fx.Node) -> Val:
        a, b = node.args[0], node.args[1]
        al = node.kwargs.get("alpha", 1) if alpha else 1
        if reverse:
            a, b = b, a
        if al != 1:
            if isinstance(b, fx.Node):
                return pointwise(ctx, node, lambda x, y: f"({x} {sym} {literal(al)} * {y})", [a, b])
            b = as_number(b) * as_number(al)
        return pointwise(ctx, node, _binary(sym), [a, b])
    return lower


register("aten.add.Tensor", "aten.add.Scalar", kind="pointwise")(_arith("+", alpha=True))
register("aten.sub.Tensor", "aten.sub.Scalar", kind="pointwise")(_arith("-", alpha=True))
register("aten.rsub.Scalar", "aten.rsub.Tensor", kind="pointwise")(_arith("-", alpha=True, reverse=True))
register("aten.mul.Tensor", "aten.mul.Scalar", kind="pointwise")(_arith("*"))


@register("aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode", "aten.div.Scalar_mode", kind="pointwise")
def _div(ctx: SegmentLowering, node: fx.Node) -> Val:
    mode = node.kwargs.get("rounding_mode")
    _, out = ctx.out(node)
    if mode is None:
        return pointwise(ctx, node, _binary("/"), node.args[:2])
    if not out.is_floating_point:
        divisor = _nonzero_divisor(node, "division")
        fn = _binary("//") if mode == "floor" else _trunc_div(divisor)
        return pointwise(ctx, node, fn, node.args[:2])
    if mode == "floor":
        return pointwise(ctx, node, lambda a, b: f"floor({a} / {b})", node.args[:2])
    return pointwise(ctx, node, lambda a, b: f"where({a} / {b} < 0, ceil({a} / {b}), floor({a} / {b}))",
                     node.args[:2])


def _nonzero_divisor(node: fx.Node, what: str) -> int:
    """The divisor of an integer ``what`` (a division or remainder), a nonzero number: eager raises at a zero
    divisor, where the language gives 0, so a tensor divisor (which may hold a zero) runs in eager."""
    d = node.args[1]
    if isinstance(d, fx.Node):
        raise LoweringError(f"integer {what} by a tensor runs in eager (eager raises at a zero divisor)")
    n = as_number(d)
    if n == 0 or not float(n).is_integer():
        raise LoweringError(f"integer {what} by {n!r} runs in eager")
    return int(n)


def _trunc_div(divisor: int) -> Fn:
    """Integer division rounded toward zero by the number ``divisor``: the floor quotient, plus one where
    the division is inexact and the quotient negative (the dividend's sign opposite the divisor's)."""
    def fn(a: str, d: str) -> str:
        negative = f"{a} < 0" if divisor > 0 else f"{a} > 0"
        return f"(({a} // {d}) + where({negative}, where({a} % {d} != 0, 1, 0), 0))"
    return fn


@register("aten.remainder.Tensor", "aten.remainder.Scalar", kind="pointwise")
def _remainder(ctx: SegmentLowering, node: fx.Node) -> Val:
    """The remainder with the divisor's sign, the language's ``%`` (floats: NaN for a zero divisor)."""
    _, out = ctx.out(node)
    if not out.is_floating_point:
        _nonzero_divisor(node, "remainder")
    return pointwise(ctx, node, _binary("%"), node.args[:2])


#: Integer dtypes and their widths (shifts and bitwise_not are arithmetic on them).
_INTEGER_BITS = {torch.int8: 8, torch.int16: 16, torch.int32: 32, torch.int64: 64, torch.uint8: 8}


@register("aten.__rshift__.Scalar", "aten.bitwise_right_shift.Tensor_Scalar", "aten.__lshift__.Scalar",
          "aten.bitwise_left_shift.Tensor_Scalar", "aten.__rshift__.Tensor", "aten.__lshift__.Tensor",
          "aten.bitwise_right_shift.Tensor", "aten.bitwise_left_shift.Tensor", kind="pointwise")
def _shift(ctx: SegmentLowering, node: fx.Node) -> Val:
    """A shift of integers by a number ``k``: ``x >> k`` is the floor quotient by ``2**k`` (an arithmetic
    shift of two's complement), ``x << k`` the product by ``2**k`` (wrapping around as the type does).
    ``2**k`` must be a literal of the type: ``k`` below its width (less one if signed)."""
    _, out = ctx.out(node)
    bits, k = _INTEGER_BITS.get(out), node.args[1]
    if bits is None or isinstance(k, fx.Node):
        raise LoweringError(f"{node.target} of {out} by {'a tensor' if isinstance(k, fx.Node) else k} runs in eager")
    n = int(as_number(k))
    if not 0 <= n < bits - (out != torch.uint8):
        raise LoweringError(f"{node.target} by {n} runs in eager (2**{n} is not a {out} literal)")
    sym = "//" if "right" in str(node.target) or "rshift" in str(node.target) else "*"
    return pointwise(ctx, node, lambda a: f"({a} {sym} {1 << n})", [node.args[0]])


@register("aten.pow.Tensor_Scalar", kind="pointwise")
def _pow(ctx: SegmentLowering, node: fx.Node) -> Val:
    x, e = node.args[0], node.args[1]
    _, out = ctx.out(node)
    if isinstance(e, float) and e.is_integer() and abs(e) <= 64:
        e = int(e)
    if isinstance(e, int) and not isinstance(e, bool):
        if e == 0:
            return pointwise(ctx, node, lambda a: f"({a} * 0 + 1)", [x])
        if e < 0 and not out.is_floating_point:
            raise LoweringError("negative integer powers of integers run in eager")
        if e == 2:
            return pointwise(ctx, node, lambda a: f"({a} * {a})", [x])
        if e > 0:
            return pointwise(ctx, node, lambda a: f"({a} ** {e})", [x])
        return pointwise(ctx, node, lambda a: f"(1 / ({a} ** {-e}))", [x])
    if e == 0.5 and out.is_floating_point:
        return pointwise(ctx, node, lambda a: f"sqrt({a})", [x])
    raise LoweringError(f"pow with exponent {e!r} runs in eager")


def _unary(fn: Fn, *, float_only: bool = True) -> Callable[[SegmentLowering, fx.Node], Val]:
    def lower(ctx: SegmentLowering, node: fx.Node) -> Val:
        _, out = ctx.out(node)
        if float_only and not out.is_floating_point:
            raise LoweringError(f"{node.target} of integers runs in eager")
        return pointwise(ctx, node, fn, [node.args[0]])
    return lower


_SQRT1_2 = repr(math.sqrt(0.5))
_SQRT_2_PI = repr(math.sqrt(2 / math.pi))
for _name, _fn, _flt in [
    ("aten.neg.default", lambda a: f"(-{a})", False),
    ("aten.exp.default", lambda a: f"exp({a})", True),
    ("aten.log.default", lambda a: f"log({a})", True),
    ("aten.sqrt.default", lambda a: f"sqrt({a})", True),
    ("aten.rsqrt.default", lambda a: f"(1 / sqrt({a}))", True),
    ("aten.reciprocal.default", lambda a: f"(1 / {a})", True),
    ("aten.tanh.default", lambda a: f"tanh({a})", True),
    ("aten.sigmoid.default", lambda a: f"sigmoid({a})", True),
    ("aten.erf.default", lambda a: f"erf({a})", True),
    ("aten.abs.default", lambda a: f"abs({a})", False),
    ("aten.relu.default", lambda a: f"where({a} < 0, 0, {a})", False),
    ("aten.silu.default", lambda a: f"({a} * sigmoid({a}))", True),
    ("aten.floor.default", lambda a: f"floor({a})", True),
    ("aten.ceil.default", lambda a: f"ceil({a})", True),
    ("aten.round.default", lambda a: f"round({a})", True),
]:
    register(_name, kind="pointwise")(_unary(_fn, float_only=_flt))


@register("aten.gelu.default", kind="pointwise")
def _gelu(ctx: SegmentLowering, node: fx.Node) -> Val:
    tanh_form = _kw(node, "approximate", 1, "none") == "tanh"

    def fn(a: str) -> str:
        if tanh_form:
            return f"(0.5 * {a} * (1 + tanh({_SQRT_2_PI} * ({a} + 0.044715 * {a} * {a} * {a}))))"
        return f"(0.5 * {a} * (1 + erf({a} * {_SQRT1_2})))"
    return _unary(fn)(ctx, node)


@register("aten.maximum.default", kind="pointwise")
def _maximum(ctx: SegmentLowering, node: fx.Node) -> Val:
    return pointwise(ctx, node, nan_max, node.args[:2])


@register("aten.minimum.default", kind="pointwise")
def _minimum(ctx: SegmentLowering, node: fx.Node) -> Val:
    return pointwise(ctx, node, nan_min, node.args[:2])


def _clamp_fn(lo: Argument, hi: Argument) -> Fn:
    def fn(a: str, *bounds: str) -> str:
        it = iter(bounds)
        lo_t = next(it) if lo is not None else None
        hi_t = next(it) if hi is not None else None
        r = a
        if lo_t is not None:
            r = f"where({r} < {lo_t}, {lo_t}, {r})"
        if hi_t is not None:
            r = f"where({r} > {hi_t}, {hi_t}, {r})"
        return r
    return fn


@register("aten.clamp.default", "aten.clamp.Tensor", "aten.clamp_min.default", "aten.clamp_max.default",
          "aten.clamp_min.Tensor", "aten.clamp_max.Tensor", "aten.hardtanh.default", kind="pointwise")
def _clamp(ctx: SegmentLowering, node: fx.Node) -> Val:
    name = str(node.target)
    if "clamp_min" in name:
        lo, hi = node.args[1], None
    elif "clamp_max" in name:
        lo, hi = None, node.args[1]
    elif "hardtanh" in name:
        lo, hi = _kw(node, "min_val", 1, -1.0), _kw(node, "max_val", 2, 1.0)
    else:
        lo, hi = _kw(node, "min", 1), _kw(node, "max", 2)
    for b in (lo, hi):
        if isinstance(b, fx.Node) and (b.meta["val"].dtype != node.meta["val"].dtype):
            raise LoweringError("clamp with bounds of another dtype runs in eager")
    bounds = [b for b in (lo, hi) if b is not None]
    return pointwise(ctx, node, _clamp_fn(lo, hi), [node.args[0], *bounds])


def _compare(sym: str) -> Callable[[SegmentLowering, fx.Node], Val]:
    def lower(ctx: SegmentLowering, node: fx.Node) -> Val:
        a, b = node.args[0], node.args[1]
        comp = _promoted(a, b)
        return pointwise(ctx, node, _binary(sym), [a, b], compute=comp, result=torch.bool)
    return lower


for _op, _sym in [("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">=")]:
    register(f"aten.{_op}.Tensor", f"aten.{_op}.Scalar", kind="pointwise")(_compare(_sym))


@register("aten.logical_not.default", "aten.bitwise_not.default", kind="pointwise")
def _not(ctx: SegmentLowering, node: fx.Node) -> Val:
    out = node.meta["val"].dtype
    if out != torch.bool and "logical" not in str(node.target):
        if out not in _INTEGER_BITS:
            raise LoweringError(f"bitwise_not of {out} runs in eager")
        # two's complement: ~x is -1 - x (no overflow at either end); an unsigned byte's is 255 - x
        top = "255" if out == torch.uint8 else "(-1)"
        return pointwise(ctx, node, lambda a: f"({top} - {a})", [node.args[0]])
    src = fake(node.args[0]).dtype
    return pointwise(ctx, node, lambda a: f"({a} == 0)", [node.args[0]], compute=src, result=torch.bool)


_BOOLS = ("True", "False")


def select(c: str, x: str, y: str) -> str:
    """``where(c, x, y)`` of a boolean condition ``c``, folded when both branches are boolean literals (a
    lower triangle of ``ones(dtype=bool)``, a logical op with a constant): the language promotes two weak
    operands, and two weak booleans give int64, which is no condition for a ``where`` reading the result."""
    if x in _BOOLS and y in _BOOLS:
        if x == y:
            return x
        return c if x == "True" else f"({c} == 0)"
    return f"where({c}, {x}, {y})"


@register("aten.where.self", kind="pointwise")
def _where(ctx: SegmentLowering, node: fx.Node) -> Val:
    return pointwise(ctx, node, select, node.args[:3], casts=(torch.bool,))


@register("aten._to_copy.default", "aten.clone.default", "aten.alias.default", "aten.lift_fresh_copy.default",
          "aten.detach.default", "prims.convert_element_type.default", kind="pointwise")
def _copy(ctx: SegmentLowering, node: fx.Node) -> Val:
    if node.kwargs.get("layout") not in (None, torch.strided):
        raise LoweringError("copies to another layout run in eager")
    src = fake(node.args[0])
    if node.meta["val"].device != src.device:
        raise LoweringError("copies to another device run in eager")
    v = ctx.val(node.args[0])
    shape, out = ctx.out(node)
    if out == v.dtype:
        return v
    return Val(shape, out, lambda idx: cast(v.load(idx), v.dtype, out), ops=v.ops + 1)


def _logical(fn: Fn) -> Callable[[SegmentLowering, fx.Node], Val]:
    def lower(ctx: SegmentLowering, node: fx.Node) -> Val:
        return pointwise(ctx, node, fn, node.args[:2], compute=torch.bool, result=torch.bool)
    return lower


register("aten.logical_and.default", kind="pointwise")(_logical(lambda a, b: select(a, b, "False")))
register("aten.logical_or.default", kind="pointwise")(_logical(lambda a, b: select(a, "True", b)))
register("aten.logical_xor.default", kind="pointwise")(_logical(lambda a, b: f"({a} != {b})"))


def _bitwise_bool(fn: Fn) -> Callable[[SegmentLowering, fx.Node], Val]:
    """A bitwise op on booleans (a logical one); on integers it runs in eager (the expression language has
    no bitwise operators)."""
    logical = _logical(fn)

    def lower(ctx: SegmentLowering, node: fx.Node) -> Val:
        if node.meta["val"].dtype != torch.bool:
            raise LoweringError(f"{node.target} of integers runs in eager (no bitwise operator in the language)")
        return logical(ctx, node)
    return lower


register("aten.bitwise_and.Tensor", "aten.bitwise_and.Scalar", kind="pointwise")(
    _bitwise_bool(lambda a, b: select(a, b, "False")))
register("aten.bitwise_or.Tensor", "aten.bitwise_or.Scalar", kind="pointwise")(
    _bitwise_bool(lambda a, b: select(a, "True", b)))
register("aten.bitwise_xor.Tensor", "aten.bitwise_xor.Scalar", kind="pointwise")(
    _bitwise_bool(lambda a, b: f"({a} != {b})"))


@register("aten.isnan.default", "aten.isinf.default", kind="pointwise")
def _isnan(ctx: SegmentLowering, node: fx.Node) -> Val:
    src = fake(node.args[0]).dtype
    if not src.is_floating_point:
        raise LoweringError("isnan/isinf of integers run in eager")
    fn: Fn = ((lambda a: f"({a} != {a})") if "isnan" in str(node.target)
              else (lambda a: f"(abs({a}) == {literal(float('inf'))})"))
    return pointwise(ctx, node, fn, [node.args[0]], compute=src, result=torch.bool)
