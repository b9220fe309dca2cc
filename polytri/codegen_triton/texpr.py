"""Expression trees -> Triton (device) and Python (host) expression text.

The type rules of :mod:`polytri.dtypes` are made explicit as in the C printer: each operand is converted
to the operation's type.  Integer division and remainder go through helpers with floor semantics (Triton,
like C, truncates).  Loop counters, bounds and offsets are computed in the module's index type, int32
where every value fits and int64 elsewhere (see :mod:`.index_width`); a counter or parameter used as an
int64 value (``A[i] = i * N``) is converted to int64 first, as the type rules say, whatever that width.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .. import dtypes
from ..dtypes import BFLOAT16, BOOL, FLOAT16, FLOAT64, DType
from ..ir.affine import const_value
from ..ir.expr import COMPARE_OPS, Access, Binary, Call, Cast, Const, Expr, Unary, Var, walk
from ..ir.indirect import is_indirect_subscript
from ..ir.reduction import NAN_EXTREMES, nan_select
from ..ir.types import Typer

TL_TYPES = {"bool": "tl.int1", "int8": "tl.int8", "uint8": "tl.uint8", "int32": "tl.int32", "int64": "tl.int64",
            "float16": "tl.float16", "bfloat16": "tl.bfloat16", "float32": "tl.float32", "float64": "tl.float64"}
#: Triton's names of pointer element types in kernel signatures (ahead-of-time compilation).
SIGNATURE_TYPES = {"bool": "i1", "int8": "i8", "uint8": "u8", "int32": "i32", "int64": "i64", "float16": "fp16",
                   "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}

#: Names the generated code binds: ``pt_<user name>`` for arrays, scalars and parameters, ``pt__<x>``
#: for polytri's own temporaries, ``c<k>`` for loop counters; user names cannot start with ``pt_`` or
#: ``_`` or look like ``c<k>`` (the builder rejects them), so nothing can clash.
USER_PREFIX = "pt_"


def user(name: str) -> str:
    """The generated-code name of a user array, scalar or parameter."""
    return USER_PREFIX + name


def _float_literal(v: float) -> str:
    if np.isnan(v):
        return 'float("nan")'
    if np.isinf(v):
        return 'float("inf")' if v > 0 else 'float("-inf")'
    return repr(float(v))


def index_text(e: Expr, names: Mapping[str, str], *, device: bool = True) -> str:
    """An integer expression (subscript, loop bound, condition) over counters and parameters.

    ``names`` maps loop counters (and statement iterators, already substituted) to their text; parameters
    become ``pt_<name>``.  On the host (``device=False``) Python's ``//`` and ``%`` already floor."""
    if isinstance(e, Const):
        return ("True" if e.value else "False") if isinstance(e.value, bool) else str(e.value)
    v = const_value(e)
    if v is not None:
        return f"({v})" if v < 0 else str(v)
    printer = _INDEX_PRINTERS.get(type(e))
    text = None if printer is None else printer(e, names, device)
    if text is None:
        raise TypeError(f"not an index expression: {e!r}")
    return text


def _index_var(e: Var, names: Mapping[str, str], device: bool) -> str:
    """A parameter (``pt_<name>``) or a counter (its text in ``names``)."""
    if e.kind == "param":
        return user(e.name)
    return names.get(e.name, e.name)


def _index_unary(e: Unary, names: Mapping[str, str], device: bool) -> str:
    return f"(-{index_text(e.operand, names, device=device)})"


def _index_binary(e: Binary, names: Mapping[str, str], device: bool) -> str:
    """An operation; on the device, floor division and modulo through helpers, ``and``/``or`` bitwise."""
    a, b = index_text(e.lhs, names, device=device), index_text(e.rhs, names, device=device)
    if e.op in ("//", "%") and device:
        return f"{'pt__floordiv' if e.op == '//' else 'pt__mod'}({a}, {b})"
    op = {"and": "&", "or": "|"}.get(e.op, e.op) if device else e.op
    return f"({a} {op} {b})"


def _index_call(e: Call, names: Mapping[str, str], device: bool) -> str | None:
    """``min``, ``max`` or ``where`` (``None`` for another function)."""
    args = [index_text(a, names, device=device) for a in e.args]
    if e.func in ("min", "max"):
        return f"tl.{e.func}imum({args[0]}, {args[1]})" if device else f"{e.func}({args[0]}, {args[1]})"
    if e.func == "where":
        return f"tl.where({args[0]}, {args[1]}, {args[2]})" if device else \
            f"({args[1]} if {args[0]} else {args[2]})"
    return None


#: :func:`index_text`'s printer of each kind of expression node that can occur in an index expression.
_INDEX_PRINTERS: dict[type, Callable[[Any, Mapping[str, str], bool], str | None]] = {
    Var: _index_var, Unary: _index_unary, Binary: _index_binary, Call: _index_call,
}


class TritonExprPrinter:
    """Prints statement values as Triton expressions.

    ``load(access)`` returns the text of a load of one element (or block of elements); with
    ``bf16_as_f32`` (the interpreter, whose ``bfloat16`` support is broken) bfloat16 values live in
    float32 and are rounded to bfloat16 after every operation, which reproduces bfloat16 arithmetic."""

    def __init__(self, typer: Typer, load: Callable[[Access], str], names: Mapping[str, str], *,
                 bf16_as_f32: bool, index: str = "int32"):
        self.t = typer
        self.index = index
        """The type of the kernel's counters and parameters (``int32`` or ``int64``)."""
        self.load = load
        self.names = names
        self.bf16_as_f32 = bf16_as_f32

    def tl_type(self, d: DType) -> str:
        """The Triton type values of ``d`` are computed in."""
        if d is BFLOAT16 and self.bf16_as_f32:
            return "tl.float32"
        return TL_TYPES[d.name]

    def rnd(self, d: DType, text: str) -> str:
        return f"pt__round_bf16({text})" if d is BFLOAT16 and self.bf16_as_f32 else text

    def cast(self, text: str, src: DType, to: DType) -> str:
        if to is BOOL:
            return f"({text} != 0)"
        if src is to or (self.tl_type(src) == self.tl_type(to) and not (to is BFLOAT16 and src is not to)):
            return text
        return self.rnd(to, f"({text}).to({self.tl_type(to)})")

    def conv(self, e: Expr, to: DType) -> str:
        """``e`` as a value of type ``to``."""
        src = self.t(e)
        if isinstance(e, Const) and not isinstance(e.value, bool):
            if to.kind == "f":
                v = float(e.value)
                if to is FLOAT64 and float(np.float32(v)) != v and np.isfinite(v):
                    return f"tl.full((), {v!r}, tl.float64)"
                if to is BFLOAT16 or to is FLOAT16:
                    return f"tl.full((), {_float_literal(v)}, {self.tl_type(to)})"
                return _float_literal(v)
            if isinstance(e.value, int) and to.kind == "i":
                return f"tl.full((), {e.value}, {self.tl_type(to)})" if to.bits < 32 else str(e.value)
        code = self.expr(e)
        if isinstance(e, Var) and e.kind != "scalar" and to.kind == "i" and to.bits > 32 and self.index == "int32":
            return f"{code}.to({TL_TYPES[to.name]})"  # an int32 counter: int64 arithmetic needs int64 operands
        if not src.weak and src.dtype is to:
            return code
        converted = self.cast(code, src.dtype, to)
        if converted != code and to is not BOOL and not any(isinstance(n, (Access, Var)) for n in walk(e)):
            # an expression of literals is a Python number while Triton traces the kernel: no .to() on it
            return self.rnd(to, f"tl.full((), {code}, {self.tl_type(to)})")
        return converted

    def expr(self, e: Expr) -> str:
        t = self.t(e)
        d = t.dtype
        if isinstance(e, Const):
            if isinstance(e.value, bool):
                return "True" if e.value else "False"
            return str(e.value) if isinstance(e.value, int) else _float_literal(e.value)
        if isinstance(e, Var):
            return user(e.name) if e.kind in ("param", "scalar") else self.names.get(e.name, e.name)
        if isinstance(e, Access):
            return self.load(e)
        if isinstance(e, Cast):
            return self.conv(e.operand, dtypes.dtype(e.dtype))
        if isinstance(e, Unary):
            return self.rnd(d, f"(-{self.conv(e.operand, d)})")
        if isinstance(e, Binary):
            return self.binary(e, d)
        if isinstance(e, Call):
            return self.call(e, d)
        raise TypeError(e)

    def binary(self, e: Binary, d: DType) -> str:
        if e.op in COMPARE_OPS:
            od = self.t.operand_type(e).dtype
            return f"({self.conv(e.lhs, od)} {e.op} {self.conv(e.rhs, od)})"
        if e.op in ("and", "or"):
            return f"({self.conv(e.lhs, BOOL)} {'&' if e.op == 'and' else '|'} {self.conv(e.rhs, BOOL)})"
        if e.op == "**" and const_value(e.rhs) is None:
            return self.power(e, d)
        if e.op == "**":
            n = int(const_value(e.rhs) or 0)
            x = self.conv(e.lhs, d)
            if n == 0:
                return self.conv(Const(1), d)
            out = x
            for _ in range(abs(n) - 1):
                out = self.rnd(d, f"({out} * {x})")
            return self.rnd(d, f"(1.0 / {out})") if n < 0 else out
        a, b = self.conv(e.lhs, d), self.conv(e.rhs, d)
        if e.op in ("//", "%"):
            if d.kind == "f":
                q = f"tl.floor({a} / {b})"
                return self.rnd(d, q if e.op == "//" else f"({a} - {q} * {b})")
            fn = "pt__floordiv" if e.op == "//" else "pt__mod"
            return f"{fn}({a}, {b})"
        return self.rnd(d, f"({a} {e.op} {b})")

    def power(self, e: Binary, d: DType) -> str:
        """``x ** y`` with a float or variable exponent (a float type): ``pt__pow`` in float64 (exp and log
        in float32 would lose bits), rounded back; literals become tensors for the helper's selects."""
        args = ", ".join(f"tl.full((), {_float_literal(float(a.value))}, tl.float64)" if isinstance(a, Const)
                         else self.conv(a, FLOAT64) for a in (e.lhs, e.rhs))
        return self.cast(f"pt__pow({args})", FLOAT64, d)

    def call(self, e: Call, d: DType) -> str:
        f = e.func
        if f in NAN_EXTREMES:  # the select it is computed with
            return self.call(nan_select(e), d)
        if f == "where":
            return f"tl.where({self.conv(e.args[0], BOOL)}, {self.conv(e.args[1], d)}, {self.conv(e.args[2], d)})"
        if f in ("min", "max"):
            return f"tl.{f}imum({self.conv(e.args[0], d)}, {self.conv(e.args[1], d)})"
        if d.kind != "f":
            x = self.conv(e.args[0], d)
            return f"tl.abs({x})" if f == "abs" else x  # floor / ceil of an integer
        if f == "abs":
            return f"tl.abs({self.conv(e.args[0], d)})"
        # math functions: fp32 / fp64 only in Triton; 16-bit values go through fp32 and are rounded back
        wide = d if d.bits >= 32 else dtypes.FLOAT32
        x = self.conv(e.args[0], wide)
        body = {"exp": "tl.exp({})", "log": "tl.log({})", "sqrt": "tl.sqrt_rn({})" if wide.bits == 32 else "tl.sqrt({})", "floor": "tl.floor({})",
                "ceil": "tl.ceil({})", "erf": "tl.erf({})", "sigmoid": "pt__sigmoid({})",
                "tanh": "pt__tanh({})", "round": "pt__rint({})"}[f].format(x)
        return body if wide is d else self.cast(body, wide, d)


def array_offset(acc: Access, shape: tuple[Expr, ...], names: Mapping[str, str],
                 indirect: Callable[[Expr], str] | None = None) -> str:
    """Row-major linear offset of ``acc``: Horner's scheme over the (parameter-valued) shape.  An indirect
    subscript (one that reads an index array) is printed by ``indirect``, as a value with its loads."""
    def sub(e: Expr) -> str:
        if not is_indirect_subscript(e):
            return index_text(e, names)
        if indirect is None:
            raise TypeError(f"indirect subscript without a printer: {e!r}")
        return indirect(e)
    out = sub(acc.index[0]) if acc.index else "0"
    for idx, extent in zip(acc.index[1:], shape[1:]):
        out = f"({out}) * {index_text(extent, names)} + {sub(idx)}"
    return out


#: Helper functions every generated module defines (device functions, wrapped like the kernels).
HELPERS = '''
def pt__floordiv(a, b):
    """Floor division whatever the sign convention of the backend's ``//``."""
    q = a // b
    r = a - q * b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), q - 1, q)


def pt__mod(a, b):
    """Remainder with the sign of the divisor (Python's and numpy's ``%``)."""
    r = a - (a // b) * b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


def pt__sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


def pt__rint(x):
    """Round to the nearest integer, ties to even: adding and subtracting 2**23 (float32) or 2**52
    (float64) with the sign of x rounds in the current mode; larger values are integers already."""
    big = 8388608.0 if x.dtype == tl.float32 else 4503599627370496.0
    c = tl.where(x < 0, -big, big).to(x.dtype)
    return tl.where(tl.abs(x) < big, (x + c) - c, x)


def pt__tanh(x):
    """tanh from exp, stable for large |x|."""
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


def pt__pow(x, y):
    """C's pow (numpy's power) from exp and log: the sign of an odd integer power of a negative base, NaN
    for a finite negative base and a non-integer exponent, 1 for pow(x, 0), pow(1, y) and pow(-1, +-inf)."""
    r = tl.exp(y * tl.log(tl.abs(x)))
    whole = tl.floor(y) == y
    half = y * 0.5
    odd = tl.where(whole, tl.floor(half) != half, False)  # selects, not `&`: 0-d operands in the interpreter
    nan = tl.where(x == -float("inf"), r, float("nan"))
    r = tl.where(x < 0, tl.where(odd, -r, tl.where(whole, r, nan)), r)
    r = tl.where(tl.abs(y) == float("inf"), tl.where(x == -1, 1.0, r), r)
    return tl.where(y == 0, 1.0, tl.where(x == 1, 1.0, r))


def pt__round_bf16(x):
    """Round float32 values to the nearest bfloat16 (ties to even), kept in float32."""
    u = x.to(tl.uint32, bitcast=True)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.to(tl.float32, bitcast=True)
'''
