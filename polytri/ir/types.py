"""Type inference for expression trees (rules in :mod:`polytri.dtypes`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import dtypes
from ..dtypes import BOOL, INT64, VType
from ..errors import TypeCheckError
from .affine import const_value
from .expr import COMPARE_OPS, Access, Binary, Call, Cast, Const, Expr, Unary, Var
from .printer import expr_to_str

#: Looks up the dtype of an array or scalar by name.
DTypeOf = Callable[[str], dtypes.DType]


def infer(e: Expr, array_dtype: DTypeOf, scalar_dtype: DTypeOf) -> VType:
    """The type of ``e``; raise :class:`TypeCheckError` on an ill-typed expression."""
    return Typer(array_dtype, scalar_dtype)(e)


def program_typer(program: object) -> Typer:
    """A :class:`Typer` for the arrays and scalars of a :class:`~polytri.ir.program.Program`."""
    arrays = {a.name: dtypes.dtype(a.dtype) for a in program.arrays}  # type: ignore[attr-defined]
    scalars = {s.name: dtypes.dtype(s.dtype) for s in program.scalars}  # type: ignore[attr-defined]
    return Typer(arrays.__getitem__, scalars.__getitem__)


def check_literals(t: VType, operands: tuple[Expr, ...], where: Expr) -> VType:
    """Integer literals converted to a narrow integer type must fit in it (NEP 50 raises there too)."""
    if t.weak or t.dtype.kind != "i" or t.dtype.bits == 64:
        return t
    info = np.iinfo(t.dtype.name)  # the integer types are numpy's
    lo, hi = int(info.min), int(info.max)
    for x in operands:
        v = const_value(x)
        if v is not None and not lo <= v <= hi:
            raise TypeCheckError(f"in {expr_to_str(where)}: the literal {v} does not fit in {t.dtype} "
                                 f"[{lo}, {hi}]; cast the other operand first, e.g. int64(...)")
    return t


class Typer:
    """Computes (and memoizes, per structurally equal node) the type of every expression node."""

    def __init__(self, array_dtype: DTypeOf, scalar_dtype: DTypeOf):
        self.array_dtype = array_dtype
        self.scalar_dtype = scalar_dtype
        self._memo: dict[Expr, VType] = {}

    def __call__(self, e: Expr) -> VType:
        t = self._memo.get(e)
        if t is None:
            t = self._memo[e] = self.run(e)
        return t

    def operand_type(self, e: Expr) -> VType:
        """The type ``e``'s operands are converted to before the operation (comparisons: promoted)."""
        if isinstance(e, Binary) and e.op in COMPARE_OPS:
            return dtypes.promote(self(e.lhs), self(e.rhs))
        return self(e)

    def run(self, e: Expr) -> VType:
        if isinstance(e, Const):
            v = e.value
            if isinstance(v, bool):
                return VType(BOOL, True)
            return VType(INT64 if isinstance(v, int) else dtypes.FLOAT64, True)
        if isinstance(e, Var):
            if e.kind == "scalar":
                return VType(self.scalar_dtype(e.name))
            return VType(INT64, True)
        if isinstance(e, Access):
            return VType(self.array_dtype(e.array))
        if isinstance(e, Cast):
            self(e.operand)
            return VType(dtypes.dtype(e.dtype))
        if isinstance(e, Unary):
            t = self(e.operand)
            return VType(INT64, t.weak) if t.dtype is BOOL else t
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Call):
            return self.call(e)
        raise TypeError(f"not an expression node: {e!r}")

    def binary(self, e: Binary) -> VType:
        a, b = self(e.lhs), self(e.rhs)
        if e.op != "**":
            check_literals(dtypes.promote(a, b), (e.lhs, e.rhs), e)
        if e.op in COMPARE_OPS:
            return VType(BOOL)
        if e.op == "/":
            return dtypes.true_div(a, b)
        if e.op == "**":
            n = const_value(e.rhs)
            if n is None:  # a float or variable exponent: C's pow
                return self.power(e, a, b)
            if n < 0 and a.dtype.kind != "f":
                raise TypeCheckError(f"in {expr_to_str(e)}: negative power of an integer")
            return VType(INT64, a.weak) if a.dtype is BOOL else a
        return dtypes.arith(a, b)

    @staticmethod
    def power(e: Binary, base: VType, exponent: VType) -> VType:
        """``x ** y`` whose exponent is not an integer constant (C's ``pow``): the promoted type, which must be a float (numpy's integer power with a variable
        exponent, which fails on negative exponents, is not in the language: cast to a float first)."""
        t = dtypes.promote(base, exponent)
        if t.dtype.kind != "f":
            raise TypeCheckError(f"in {expr_to_str(e)}: the exponent of an integer ** must be an integer "
                                 f"constant; cast the base to a float type, e.g. float64(x) ** y")
        return t

    def call(self, e: Call) -> VType:
        ts = [self(a) for a in e.args]
        f = e.func
        if f in ("exp", "log", "sqrt", "tanh", "sigmoid", "erf"):
            return dtypes.floating(ts[0])
        if f in ("floor", "ceil", "round"):
            return ts[0] if ts[0].dtype is not BOOL else VType(INT64, ts[0].weak)
        if f == "abs":
            return ts[0] if ts[0].dtype is not BOOL else VType(INT64, ts[0].weak)
        if f in ("min", "max", "nanmax", "nanmin"):
            return check_literals(dtypes.promote(ts[0], ts[1]), e.args, e)
        if f == "where":
            if ts[0].dtype is not BOOL:
                raise TypeCheckError(f"in {expr_to_str(e)}: the condition of where() must be a comparison "
                                     f"(bool), got {ts[0].dtype}")
            return check_literals(dtypes.promote(ts[1], ts[2]), e.args[1:], e)
        raise TypeCheckError(f"unknown function {f!r}")
