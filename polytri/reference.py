"""``pt.reference``: the original-order interpreter, the ground truth of every test.

It is deliberately simple and independent of the compilers: isl enumerates every statement instance,
instances are sorted by the original schedule, and each statement runs as a small generated Python
function on numpy scalars, with the type rules of :mod:`polytri.dtypes` made explicit by casts.
Work happens on copies, which are written back only when the whole run succeeded.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable
from typing import Any

import islpy as isl
import numpy as np

from . import dtypes
from .dtypes import BFLOAT16, FLOAT16, DType
from .errors import IndexValueError, public
from .ir.affine import const_value
from .ir.builder import to_program
from .ir.expr import Access, Binary, Call, Cast, Const, Expr, Unary, Var
from .ir.indirect import is_indirect_subscript
from .ir.islutil import fix_params
from .ir.printer import format_const
from .ir.program import Program, Statement
from .ir.reduction import is_nan_extreme, nan_select
from .ir.types import Typer, program_typer
from .ir.verify import check_bounds
from .numerics import CASTS
from .runtime.args import bind, is_torch_tensor

log = logging.getLogger("polytri.reference")


# -- numeric helpers used by the generated code ------------------------------------------------------
def _floordiv(a: Any, b: Any) -> Any:
    """Floor division: numpy's for floats (numpy scalars), 0 for an integer division by zero."""
    if not isinstance(a, np.floating) and b == 0:
        return type(a)(0)
    return a // b


def _mod(a: Any, b: Any) -> Any:
    """Modulo with the divisor's sign: numpy's for floats, 0 for an integer modulo by zero."""
    if not isinstance(a, np.floating) and b == 0:
        return type(a)(0)
    return a % b


def _powi(x: Any, n: int, rnd: Callable[[Any], Any]) -> Any:
    if n == 0:
        return rnd(1)
    r = x
    for _ in range(abs(n) - 1):
        r = rnd(r * x)
    return rnd(rnd(1) / r) if n < 0 else r


def _sigmoid(x: Any, rnd: Callable[[Any], Any]) -> Any:
    one = type(x)(1)
    return rnd(one / (one + np.exp(-x)))


def _erf(x: Any, rnd: Callable[[Any], Any]) -> Any:
    return rnd(math.erf(float(x)))


def _min(a: Any, b: Any) -> Any:
    return a if a < b else b


def _max(a: Any, b: Any) -> Any:
    return a if a > b else b


def _checked(v: Any, extent: int, array: str, d: int) -> int:
    """The value of an indirect subscript, checked again here (numpy would wrap a negative one)."""
    if not 0 <= v < extent:
        raise IndexValueError(f"reference: subscript {d} of array {array!r} is {v}, out of range "
                              f"(size {extent}); nothing was written")
    return int(v)


_ENV = {"np": np, "_floordiv": _floordiv, "_mod": _mod, "_powi": _powi, "_sigmoid": _sigmoid,
        "_erf": _erf, "_min": _min, "_max": _max, "_checked": _checked,
        **{f"_to_{k}": v for k, v in CASTS.items()}}


# -- expression printing ------------------------------------------------------------------------------
def _is16(d: DType) -> bool:
    return d in (FLOAT16, BFLOAT16)


class _PyPrinter:
    """Prints a statement body as Python with explicit numpy-typed conversions."""

    def __init__(self, typer: Typer, program: Program):
        self.t = typer
        self.program = program

    def subscript(self, acc: Access, d: int) -> str:
        """Subscript ``d`` of ``acc``; an indirect one is checked against its dimension's extent."""
        code = self.expr(acc.index[d])
        if not is_indirect_subscript(acc.index[d]):
            return code
        extent = self.expr(self.program.array(acc.array).shape[d])
        return f"_checked({code}, {extent}, {acc.array!r}, {d})"

    def conv(self, e: Expr, to: DType) -> str:
        src = self.t(e)
        code = self.expr(e)
        if not src.weak and src.dtype == to:
            return code
        if src.weak and isinstance(e, Const) and to.kind == "f" and not _is16(to):
            return f"np.{to.name}({code})"
        return f"_to_{to.name}({code})"

    def rnd(self, d: DType) -> str:
        return f"_to_{d.name}" if _is16(d) else f"np.{d.name}" if d.kind == "f" else f"_to_{d.name}"

    def expr(self, e: Expr) -> str:
        if is_nan_extreme(e):  # the select it is computed with (weak integers included)
            return self.expr(nan_select(e))
        t = self.t(e)
        if isinstance(e, Const):
            return format_const(e.value) if not (isinstance(e.value, float) and math.isinf(e.value)) else \
                ("float('inf')" if e.value > 0 else "float('-inf')")
        if isinstance(e, Var):
            return e.name
        if isinstance(e, Access):
            return f"{e.array}[{', '.join(self.subscript(e, d) for d in range(len(e.index)))}]"
        if isinstance(e, Cast):
            return f"_to_{e.dtype}({self.expr(e.operand)})"
        if t.weak and t.dtype.kind != "f":
            return self.weak_int(e)
        d = t.dtype  # weak floats are computed like strong float64 values (numpy scalars)
        if isinstance(e, Unary):
            return f"(-{self.conv(e.operand, d)})"
        if isinstance(e, Binary):
            return self.binary(e, d)
        if isinstance(e, Call):
            return self.call(e, d)
        raise TypeError(e)

    def wint(self, e: Expr) -> str:
        """A weak integer operand as a Python int (bool literals become 0/1)."""
        code = self.expr(e)
        return f"int({code})" if self.t(e).dtype.kind == "b" else code

    def weak_int(self, e: Expr) -> str:
        """Integer arithmetic on weak values (iterators, parameters, literals): Python ints."""
        if isinstance(e, Unary):
            return f"(-{self.wint(e.operand)})"
        if isinstance(e, Binary):
            a, b = self.wint(e.lhs), self.wint(e.rhs)
            if e.op in ("//", "%"):
                return f"{'_floordiv' if e.op == '//' else '_mod'}({a}, {b})"
            if e.op == "**":
                return f"_powi({a}, {const_value(e.rhs)}, int)"
            return f"({a} {e.op} {b})"
        if isinstance(e, Call):
            if e.func == "where":
                return f"({self.wint(e.args[1])} if {self.expr(e.args[0])} else {self.wint(e.args[2])})"
            if e.func in ("min", "max"):
                return f"_{e.func}({self.wint(e.args[0])}, {self.wint(e.args[1])})"
            return self.call(e, self.t(e).dtype)
        raise TypeError(e)

    def binary(self, e: Binary, d: DType) -> str:
        if e.op in ("<", "<=", ">", ">=", "==", "!="):
            od = self.t.operand_type(e).dtype
            return f"({self.conv(e.lhs, od)} {e.op} {self.conv(e.rhs, od)})"
        if e.op == "**" and const_value(e.rhs) is None:  # a float type; ** of numpy scalars is C's pow
            compute = "float32" if _is16(d) else d.name  # (np.power may take sqrt for 0.5: NaN at -inf)
            return f"{self.rnd(d)}(np.{compute}({self.conv(e.lhs, d)}) ** np.{compute}({self.conv(e.rhs, d)}))"
        if e.op == "**":
            return f"_powi({self.conv(e.lhs, d)}, {const_value(e.rhs)}, {self.rnd(d)})"
        a, b = self.conv(e.lhs, d), self.conv(e.rhs, d)
        if e.op == "//":
            code = f"_floordiv({a}, {b})"
        elif e.op == "%":
            code = f"_mod({a}, {b})"
        else:
            code = f"({a} {e.op} {b})"
        return f"_to_{d.name}({code})" if (_is16(d) or d.kind != "f") else code

    def call(self, e: Call, d: DType) -> str:
        f = e.func
        if f == "where":
            return f"({self.conv(e.args[1], d)} if {self.expr(e.args[0])} else {self.conv(e.args[2], d)})"
        if f in ("min", "max"):
            return f"_{f}({self.conv(e.args[0], d)}, {self.conv(e.args[1], d)})"
        x = self.conv(e.args[0], d)
        compute = "float32" if _is16(d) else d.name
        if f == "sigmoid":
            return f"_sigmoid(np.{compute}({x}), {self.rnd(d)})"
        if f == "erf":
            return f"_erf({x}, {self.rnd(d)})"
        if f in ("floor", "ceil", "round", "abs") and d.kind != "f":
            return f"_to_{d.name}(abs({x}))" if f == "abs" else x
        np_name = {"abs": "abs", "floor": "floor", "ceil": "ceil", "round": "rint", "exp": "exp", "log": "log", "sqrt": "sqrt",
                   "tanh": "tanh"}[f]
        return f"{self.rnd(d)}(np.{np_name}(np.{compute}({x})))"


def _statement_function(st: Statement, program: Program, typer: Typer) -> Callable[..., None]:
    pr = _PyPrinter(typer, program)
    target_dt = dtypes.dtype(program.array(st.target.array).dtype)
    value = pr.conv(st.value, target_dt)
    if target_dt is FLOAT16:
        value = f"np.float16({value})"
    args = [a.name for a in program.arrays] + [s.name for s in program.scalars] + list(program.params)
    idx = ", ".join(pr.expr(i) for i in st.target.index)
    unpack = ", ".join(st.iterators) + ("," if len(st.iterators) == 1 else "")
    loop_var = f"({unpack})" if st.iterators else "_"
    src = (f"def run_{st.name}(_points, {', '.join(args)}):\n"
           f"    for {loop_var} in _points:\n"
           f"        {st.target.array}[{idx}] = {value}\n")
    ns: dict[str, Any] = dict(_ENV)
    exec(compile(src, f"<polytri reference {program.name}.{st.name}>", "exec"), ns)
    fn = ns[f"run_{st.name}"]  # the function just defined by exec
    fn.source = src
    return fn


# -- enumeration of instances ----------------------------------------------------------------------
def _instances(st: Statement, params: dict[str, int], context: isl.Set) -> list[tuple[int, ...]]:
    dom = fix_params(st.domain.intersect_params(context), params)
    n = dom.dim(isl.dim_type.set)
    pts: list[tuple[int, ...]] = []

    def visit(p: isl.Point) -> None:
        pts.append(tuple(p.get_coordinate_val(isl.dim_type.set, k).to_python() for k in range(n)))

    dom.foreach_point(visit)
    return pts


def _time(st: Statement, point: tuple[int, ...]) -> tuple[int, ...]:
    t: list[int] = []
    for k, v in enumerate(point):
        t += [st.position[k], v]
    t.append(st.position[len(point)])
    return tuple(t)


# -- working copies --------------------------------------------------------------------------------
def _working_copy(x: Any, dt: DType) -> np.ndarray:
    if is_torch_tensor(x):
        import torch
        t = x.detach()
        if dt is BFLOAT16:
            return t.to(torch.float32).numpy().copy()
        return t.numpy().copy()
    return np.array(x, copy=True)


def _write_back(x: Any, work: np.ndarray, dt: DType) -> None:
    if is_torch_tensor(x):
        import torch
        src = torch.from_numpy(work)
        with torch.no_grad():
            x.copy_(src.to(x.dtype))
    else:
        x[...] = work


@public
def reference(program: object, **kwargs: Any) -> None:
    """Run ``program`` in its original order, in place on the given arrays (the oracle)."""
    prog = to_program(program)
    check_bounds(prog)
    bound = bind(prog, kwargs)
    typer = program_typer(prog)
    fns = {st.name: _statement_function(st, prog, typer) for st in prog.statements}
    events: list[tuple[tuple[int, ...], int, tuple[int, ...]]] = []
    for k, st in enumerate(prog.statements):
        events.extend((_time(st, pt), k, pt) for pt in _instances(st, bound.params, prog.context))
    events.sort()
    dts = {a.name: dtypes.dtype(a.dtype) for a in prog.arrays}
    work = {name: _working_copy(x, dts[name]) for name, x in bound.arrays.items()}
    call_args = [work[a.name] for a in prog.arrays] + [bound.scalars[s.name] for s in prog.scalars] + \
        [bound.params[p] for p in prog.params]
    with np.errstate(all="ignore"):
        for k, group in itertools.groupby(events, key=lambda ev: ev[1]):
            st = prog.statements[k]
            fns[st.name]([ev[2] for ev in group], *call_args)
    for name, x in bound.arrays.items():
        _write_back(x, work[name], dts[name])
    log.debug("reference run of %s: %d instances", prog.name, len(events))
