"""Expression trees -> C expressions, with precedence-aware parentheses and explicit conversions.

The type rules of :mod:`polytri.dtypes` are made explicit: each operand is converted to the operation's
type; values of 16-bit float type live in ``float`` variables and are rounded after each operation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import dtypes
from ..dtypes import BFLOAT16, FLOAT16, INT64, DType
from ..ir.affine import const_value
from ..ir.expr import COMPARE_OPS, Access, Binary, Call, Cast, Const, Expr, Unary, Var, walk
from ..ir.reduction import NAN_EXTREMES, nan_select
from ..ir.types import Typer

PRIMARY, UNARY, MUL, ADD, REL, EQ, BITAND, BITOR, AND, OR, COND = 16, 15, 13, 12, 10, 9, 8, 6, 5, 4, 3
_BIN_PREC = {"*": MUL, "/": MUL, "%": MUL, "+": ADD, "-": ADD, "<": REL, "<=": REL, ">": REL, ">=": REL,
             "==": EQ, "!=": EQ, "and": AND, "or": OR}
_C_OP = {"and": "&&", "or": "||"}


#: Identifiers the C printer emits itself (types, macros, functions of the headers it includes).  The
#: builder already rejects most of them as names; :func:`cname` renames any that gets through.
EMITTED_NAMES = frozenset({
    "bool", "true", "false", "float", "double", "int", "_Float16", "int8_t", "uint8_t", "int32_t", "int64_t", "uint16_t",
    "uint32_t", "INT64_C", "INFINITY", "NAN", "omp_get_max_threads", "memcpy", "isnan", "fabs", "fabsf", "nearbyint", "nearbyintf", "floor",
    "floorf", "ceil", "ceilf", "exp", "expf", "log", "logf", "sqrt", "sqrtf", "pow", "powf", "tanh", "tanhf", "erf", "erff",
    "fmod", "fmodf", "copysign", "copysignf", "restrict", "const", "void", "static", "inline",
    "aligned_alloc", "free", "NULL", "omp_get_num_threads", "omp_get_thread_num", "sizeof",
})


def cname(name: str) -> str:
    """The C identifier of a user name (array view, scalar, parameter, iterator).

    Names are valid identifiers (the builder checks), never start with ``_`` or ``pt_``; a name the
    printer emits itself, or one ending in ``_t`` (POSIX reserves that suffix for types), is renamed
    ``pt__u_<name>``, which no other user-derived identifier (``pt_<name>`` included) can produce."""
    if name in EMITTED_NAMES or name.endswith("_t"):
        return f"pt__u_{name}"
    return name


def comment(text: str) -> str:
    """A C block comment holding ``text`` (which can neither close it nor open a nested one)."""
    safe = text.replace("*/", "* /").replace("/*", "/ *").replace("\n", " ")
    return f"/* {safe} */"


@dataclass(frozen=True, slots=True)
class C:
    """A piece of C expression text and the precedence of its top operator."""

    text: str
    prec: int
    unrounded: C | None = None
    """Of a 16-bit result rounded in ``float`` (:meth:`CExprPrinter.rnd`): the value before the rounding,
    which a store converts to the 16-bit type itself (converting the rounded value again is a no-op)."""

    def at(self, prec: int) -> str:
        """The text, parenthesized unless it binds at least as tightly as ``prec``."""
        return self.text if self.prec >= prec else f"({self.text})"


def binop(op: str, a: C, b: C) -> C:
    """``a op b``; operands of ``||`` that are ``&&`` are parenthesized too (gcc's -Wparentheses)."""
    p = _BIN_PREC[op]
    left = AND + 1 if op == "or" else p
    return C(f"{a.at(left)} {_C_OP.get(op, op)} {b.at(max(p + 1, left))}", p)


def call(fn: str, *args: C) -> C:
    return C(f"{fn}({', '.join(a.text for a in args)})", PRIMARY)


def neg(a: C) -> C:
    """``-a``; a parenthesis keeps ``- -x`` from reading as the decrement ``--x``."""
    text = a.at(UNARY)
    return C(f"-({text})" if text.startswith("-") else f"-{text}", UNARY)


def cast(ctype: str, a: C) -> C:
    return C(f"({ctype}){a.at(UNARY)}", UNARY)


def c_int(v: int) -> C:
    text = str(v) if -(2**31) < v < 2**31 else f"INT64_C({v})"
    return C(text, PRIMARY if v >= 0 else UNARY)


def c_float(v: float, d: DType) -> C:
    if math.isnan(v):
        return C("NAN" if d.c_compute == "float" else "(double)NAN", PRIMARY if d.c_compute == "float" else UNARY)
    if math.isinf(v):
        return C("INFINITY" if v > 0 else "-INFINITY", PRIMARY if v > 0 else UNARY)
    text = repr(float(v))
    if "e" not in text and "." not in text and "n" not in text:
        text += ".0"
    if d.c_compute == "float":
        text += "f"
    return C(text, PRIMARY if v >= 0 else UNARY)


def _division_helper(e: Binary) -> str:
    """The prelude's helper for integer ``//`` or ``%`` (Python's rules): the branch-free one where the
    divisor is a positive constant (what gcc vectorizes inside OpenMP regions too)."""
    v = const_value(e.rhs)
    positive = isinstance(v, int) and v > 0
    return {"//": "pt__floordiv", "%": "pt__mod"}[e.op] + ("p_i64" if positive else "_i64")


def index_expr(e: Expr) -> C:
    """An integer (affine or loop-bound) expression in int64_t arithmetic."""
    v = const_value(e)
    if v is not None:
        return c_int(v)
    if isinstance(e, Var):
        return C(cname(e.name), PRIMARY)
    if isinstance(e, Unary):
        return neg(index_expr(e.operand))
    if isinstance(e, Binary):
        a, b = index_expr(e.lhs), index_expr(e.rhs)
        if e.op in ("//", "%"):
            return call(_division_helper(e), a, b)
        return binop(e.op, a, b)
    if isinstance(e, Call):
        args = [index_expr(a) for a in e.args]
        if e.func in ("min", "max"):
            return call(f"pt__{e.func}_int64_t", *args)
        if e.func == "where":
            return C(f"{args[0].at(OR)} ? {args[1].at(OR)} : {args[2].at(COND)}", COND)
    raise TypeError(f"not an index expression: {e!r}")


def _is16(d: DType) -> bool:
    return d in (FLOAT16, BFLOAT16)


class CExprPrinter:
    """Prints statement bodies; ``access`` prints an array element reference (without conversion)."""

    def __init__(self, typer: Typer, array_ref):
        self.t = typer
        self.array_ref = array_ref

    def rnd(self, d: DType, x: C) -> C:
        """Round a ``float`` holding a 16-bit-typed result; identity for other types."""
        if d is FLOAT16:
            return C(call("pt__round_f16", x).text, PRIMARY, x)
        if d is BFLOAT16:
            return C(call("pt__round_bf16", x).text, PRIMARY, x)
        return x

    def conv(self, e: Expr, to: DType) -> C:
        """``e`` converted to ``to``'s compute representation."""
        src = self.t(e)
        code = self.expr(e)
        if not src.weak and src.dtype == to:
            return code
        if isinstance(e, Const) and not isinstance(e.value, bool):
            if to.kind == "f":
                return self.rnd(to, c_float(float(e.value), to))
            if isinstance(e.value, int) and to is INT64:
                return code
        return self.rnd(to, cast(to.c_compute, code))

    def expr(self, e: Expr) -> C:
        """``e`` in the compute representation of its own type."""
        d = self.t(e).dtype
        method = _PRINTERS.get(type(e))
        if method is None:
            raise TypeError(e)
        return getattr(self, method)(e, d)

    def const(self, e: Const, d: DType) -> C:
        """A literal: ``true``/``false``, an integer, or a float printed as a double."""
        if isinstance(e.value, bool):
            return C("true" if e.value else "false", PRIMARY)
        if isinstance(e.value, int):
            return c_int(e.value)
        return c_float(e.value, dtypes.FLOAT64)

    def var(self, e: Var, d: DType) -> C:
        """A scalar, parameter or iterator by its C name."""
        return C(cname(e.name), PRIMARY)

    def access(self, e: Access, d: DType) -> C:
        """An array element; 16-bit floats are widened to ``float`` as they are read."""
        ref = self.array_ref(e)
        if d is FLOAT16:
            return cast("float", ref)
        if d is BFLOAT16:
            return call("pt__bf16_to_f32", ref)
        return ref

    def cast_expr(self, e: Cast, d: DType) -> C:
        """An explicit conversion."""
        return self.conv(e.operand, dtypes.dtype(e.dtype))

    def unary(self, e: Unary, d: DType) -> C:
        """A negation, in the operation's type."""
        return self.narrow(d, neg(self.conv(e.operand, d)))

    def narrow(self, d: DType, x: C) -> C:
        """Integer results narrower than ``int`` are truncated back to their type (wrap-around)."""
        if d.kind in ("i", "b") and d.bits < 64:
            return cast(d.c_type, x)
        return self.rnd(d, x)

    def binary(self, e: Binary, d: DType) -> C:
        if e.op in COMPARE_OPS:
            truth = self.bool_test(e)
            if truth is not None:
                return truth
            od = self.t.operand_type(e).dtype
            return binop(e.op, self.conv(e.lhs, od), self.conv(e.rhs, od))
        if e.op == "**":
            n = const_value(e.rhs)
            if n is None:  # a float or variable exponent (a float type): the C library's pow
                return self.rnd(d, call("powf" if d.c_compute == "float" else "pow", self.conv(e.lhs, d), self.conv(e.rhs, d)))
            return call(f"pt__powi_{d.name}", self.conv(e.lhs, d), c_int(n))
        a, b = self.conv(e.lhs, d), self.conv(e.rhs, d)
        if e.op in ("//", "%"):
            if d.kind == "f":
                fn = {"//": "pt__floordiv", "%": "pt__mod"}[e.op] + ("_f64" if d.c_compute == "double" else "_f32")
                return self.rnd(d, call(fn, a, b))
            return self.narrow(d, call(_division_helper(e), a, b))
        return self.narrow(d, binop(e.op, a, b))

    def call(self, e: Call, d: DType) -> C:
        f = e.func
        if f in NAN_EXTREMES:  # the select it is computed with
            return self.expr(nan_select(e))
        if f == "where":
            logic = self.bool_select(e) if d is dtypes.BOOL else None
            if logic is not None:
                return logic
            c = self.expr(e.args[0])
            a, b = self.conv(e.args[1], d), self.conv(e.args[2], d)
            return C(f"{c.at(OR)} ? {a.at(OR)} : {b.at(COND)}", COND)
        if f in ("min", "max"):
            return call(f"pt__{f}_{d.c_compute.replace(' ', '_')}", self.conv(e.args[0], d), self.conv(e.args[1], d))
        x = self.conv(e.args[0], d)
        if d.kind != "f":
            if f == "abs":
                return self.narrow(d, call("pt__abs_i64", x))
            return x  # floor / ceil of an integer
        suffix = "f" if d.c_compute == "float" else ""
        if f == "sigmoid":
            return self.rnd(d, call(f"pt__sigmoid_{'f32' if suffix else 'f64'}", x))
        if f in ("exp", "erf") and suffix:  # the prelude's, faster than glibc's vector functions (prelude.py)
            return self.rnd(d, call(f"pt__{f}f", x))
        name = {"abs": "fabs", "floor": "floor", "ceil": "ceil", "round": "nearbyint", "exp": "exp", "log": "log", "sqrt": "sqrt",
                "tanh": "tanh", "erf": "erf"}[f]
        return self.rnd(d, call(name + suffix, x))

    def bool_test(self, e: Binary) -> C | None:
        """A boolean compared with the integer 0 or 1 (``logical_not`` of a boolean is ``x == 0``) as ``x`` or
        ``!x``: the comparison in the operands' common type, int64, keeps gcc from vectorizing bytes."""
        for x, n in ((e.lhs, const_value(e.rhs)), (e.rhs, const_value(e.lhs))):
            if n in (0, 1) and e.op in ("==", "!=") and self.t(x).dtype is dtypes.BOOL and not self.t(x).weak:
                code = self.expr(x)
                return code if (e.op == "==") == (n == 1) else C(f"!{code.at(UNARY)}", UNARY)
        return None

    def bool_select(self, e: Call) -> C | None:
        """A boolean ``where`` with a literal arm as a bitwise operation on its two other operands, which gcc
        vectorizes (it leaves ``c ? true : x`` on bytes a scalar loop with a branch): ``where(c, True, x)``
        is ``c | x``, ``where(c, x, False)`` is ``c & x``, and their negated forms.  Both operands are
        evaluated: every access is in bounds wherever its statement runs (``check_bounds``), and an operand
        with an integer division (which could divide by zero where the select skips it) keeps the select."""
        c, a, b = e.args
        lit = [isinstance(x, Const) and isinstance(x.value, bool) for x in (a, b)]
        if lit[0] == lit[1] or any(isinstance(n, Binary) and n.op in ("//", "%") for x in e.args for n in walk(x)):
            return None
        value, other = (a, b) if lit[0] else (b, a)
        assert isinstance(value, Const)
        cond = self.conv(c, dtypes.BOOL)
        if lit[0] != (value.value is True):  # where(c, False, x) = !c & x; where(c, x, True) = !c | x
            cond = C(f"!{cond.at(UNARY)}", UNARY)
        op, prec = ("|", BITOR) if value.value is True else ("&", BITAND)
        return C(f"{cond.at(UNARY)} {op} {self.conv(other, dtypes.BOOL).at(UNARY)}", prec)


#: The method of :class:`CExprPrinter` that prints each kind of expression node (:meth:`~CExprPrinter.expr`).
_PRINTERS: dict[type, str] = {
    Const: "const", Var: "var", Access: "access", Cast: "cast_expr", Unary: "unary", Binary: "binary", Call: "call",
}
