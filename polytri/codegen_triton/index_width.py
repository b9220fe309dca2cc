"""The integer width of a Triton module's index arithmetic: int32 where every value provably fits, else int64.

GPUs compute 32-bit integers faster than 64-bit ones, so kernels count, compare and address in int32
when that is exact.  Whether it is depends on the parameters of the call: a loop from ``N`` to ``N + 4``
needs 64 bits when ``N = 2**31 - 2`` although it runs four iterations.  :func:`index_extreme` bounds
every integer the kernels compute from the loop AST they were printed from, by interval arithmetic over
the parameters' values:

* each loop counter ranges over ``[min lower, max upper + margin]``, where the margin covers the lanes
  of a block or chunk that run past the upper bound (masked off, but their counters, guards and
  addresses are still computed);
* every loop bound, guard, subscript and row-major offset (with each partial product of Horner's
  scheme) is evaluated over those ranges, as are the intermediates of the floor-division helpers;
* the parameters themselves count.

The bound is conservative (intervals ignore correlations between counters), so a program near the
limit may get the int64 variant where int32 would do; it never gets int32 where a value could overflow.
Values of statements (``A[i] = i * N`` into an int64 array) are not index arithmetic: the printer
converts counters and parameters to int64 where the program's types say int64 (see
:class:`~.texpr.TritonExprPrinter`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..ir.expr import COMPARE_OPS, Access, Binary, Call, Const, Expr, Unary, Var, accesses, substitute
from ..ir.program import Program
from ..schedule.loop_ast import Block, For, If, Node, Run, loop_upper
from .target import LaunchModel

#: The largest value an int32 holds.
INT32_MAX = 2**31 - 1

#: The two index widths a module is printed with.
INDEX_TYPES = ("int32", "int64")

Interval = tuple[float, float]
_UNBOUNDED: Interval = (-math.inf, math.inf)


class _Bounds:
    """Interval evaluation of index expressions; ``extreme`` is the largest magnitude met so far."""

    def __init__(self, params: Mapping[str, int]):
        self.params = params
        self.extreme: float = max((abs(v) for v in params.values()), default=0)

    def note(self, iv: Interval) -> Interval:
        self.extreme = max(self.extreme, abs(iv[0]), abs(iv[1]))
        return iv

    def of(self, e: Expr, env: Mapping[str, Interval]) -> Interval:
        return self.note(self._of(e, env))

    def _of(self, e: Expr, env: Mapping[str, Interval]) -> Interval:
        if isinstance(e, Const):
            v = int(e.value) if isinstance(e.value, (bool, int)) else e.value
            return (v, v)
        if isinstance(e, Var):
            if e.kind == "param" and e.name in self.params:
                v = self.params[e.name]
                return (v, v)
            return env.get(e.name, _UNBOUNDED)
        if isinstance(e, Unary):
            lo, hi = self.of(e.operand, env)
            return (-hi, -lo)
        if isinstance(e, Binary):
            return self._binary(e, env)
        if isinstance(e, Call) and e.func in ("min", "max", "where"):
            args = [self.of(a, env) for a in e.args]
            if e.func == "where":
                args = args[1:]
            if e.func == "min":
                return (min(a[0] for a in args), min(a[1] for a in args))
            return (min(a[0] for a in args), max(a[1] for a in args))
        return _UNBOUNDED  # not index arithmetic: no bound, so the int64 variant

    def _binary(self, e: Binary, env: Mapping[str, Interval]) -> Interval:
        a, b = self.of(e.lhs, env), self.of(e.rhs, env)
        if e.op in COMPARE_OPS or e.op in ("and", "or"):
            return (0, 1)
        if e.op == "+":
            return _add(a, b)
        if e.op == "-":
            return _add(a, (-b[1], -b[0]))
        if e.op == "*":
            return _mul(a, b)
        if e.op in ("//", "%"):
            # pt__floordiv / pt__mod compute q * b and r + b on the way: within |a| + |b| and 2 |b|
            ma, mb = max(abs(a[0]), abs(a[1])), max(abs(b[0]), abs(b[1]))
            self.note((0, ma + 2 * mb))
            return (-ma, ma) if e.op == "//" else (-mb, mb)
        return _UNBOUNDED


def _add(a: Interval, b: Interval) -> Interval:
    return (a[0] + b[0], a[1] + b[1])


def _mul(a: Interval, b: Interval) -> Interval:
    if any(math.isinf(x) for x in (*a, *b)):
        return _UNBOUNDED
    products = [x * y for x in a for y in b]
    return (min(products), max(products))


#: The most iterations a chunk of an inner loop runs at once (``KernelPrinter.chunk_side``).
MAX_CHUNK = 1024


def lane_margin(model: LaunchModel) -> int:
    """The most lanes a block or chunk of a kernel printed with ``model`` runs past a loop's upper bound:
    its widest block (elementwise blocks, ``tl.dot`` tiles) or chunk."""
    return max(model.block[0] * model.block[1], *model.dot_block, MAX_CHUNK)


def index_extreme(program: Program, ast: Node, params: Mapping[str, int], *, margin: int) -> float:
    """An upper bound on the magnitude of every integer that kernels printed from ``ast`` compute for
    these parameter values (``math.inf`` where an expression is not bounded); ``margin``: the largest
    number of lanes a block or chunk runs past a loop's upper bound."""
    b = _Bounds(params)
    _walk(program, ast, {}, b, margin)
    return b.extreme


def _walk(program: Program, n: Node, env: dict[str, Interval], b: _Bounds, margin: int) -> None:
    if isinstance(n, Block):
        for c in n.body:
            _walk(program, c, env, b, margin)
    elif isinstance(n, If):
        b.of(n.cond, env)
        _walk(program, n.then, env, b, margin)
        if n.orelse is not None:
            _walk(program, n.orelse, env, b, margin)
    elif isinstance(n, For):
        lo = b.of(n.lower, env)
        upper = loop_upper(n)
        hi = b.of(upper, env) if upper is not None else _UNBOUNDED
        counter = b.note((lo[0], max(lo[1], hi[1]) + margin + abs(n.step)))
        b.note((0, counter[1] - counter[0]))  # program id * block side, and the distance to the lower bound
        inner = {**env, n.var: counter}
        b.of(n.cond, inner)
        _walk(program, n.body, inner, b, margin)
    else:
        _run(program, n, env, b)


def _run(program: Program, n: Run, env: dict[str, Interval], b: _Bounds) -> None:
    st = program.statement(n.statement)
    values = dict(zip(st.iterators, n.args))
    for acc in [st.target, *accesses(st.value)]:
        placed = substitute(acc, values)
        assert isinstance(placed, Access)
        shape = program.array(acc.array).shape
        offset = b.of(placed.index[0], env) if placed.index else (0, 0)
        for idx, extent in zip(placed.index[1:], shape[1:]):  # Horner's scheme, as array_offset prints it
            offset = b.note(_add(b.note(_mul(offset, b.of(extent, env))), b.of(idx, env)))
