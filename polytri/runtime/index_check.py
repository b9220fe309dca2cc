"""The call-time half of indirect subscripts: every value an indirect subscript takes is in range.

isl proves the reads of index arrays in bounds (:mod:`polytri.ir.verify`), but not the values they
hold.  :func:`check_index_values` computes each indirect subscript for every instance of its statement,
with numpy (or torch, on the tensors' own device), before anything runs, and raises
:class:`~polytri.errors.IndexValueError` naming the array, the index array and the offending value.
Index arrays are never written by the program (``index-arrays`` verifier check), so their values at
call time are the values the program reads.  The instances are the points of the statement's domain
projected on the iterators the subscript uses: a box of ``arange`` vectors when the projection is a
box (the usual case), the points isl enumerates otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import islpy as isl
import numpy as np

from ..errors import IndexValueError
from ..ir.affine import evaluate
from ..ir.expr import Access, Binary, Call, Cast, Const, Expr, Unary, Var, var_names
from ..ir.indirect import index_reads, indirect_dims
from ..ir.islutil import fix_params
from ..ir.printer import expr_to_str
from ..ir.program import Program, Statement
from ..ir.verify import check_index_arrays


class _Xp:
    """The few array operations the check needs, on numpy arrays or on torch tensors of one device."""

    def __init__(self, like: Any):
        self.torch = type(like).__module__.startswith("torch")
        self.device = like.device if self.torch else None

    def array(self, v: Any) -> Any:
        if self.torch:
            import torch
            return torch.as_tensor(v, dtype=torch.int64, device=self.device)
        return np.asarray(v, dtype=np.int64)

    def lift(self, v: Any) -> Any:
        """``v`` as an array: constants are Python numbers until an operation needs an array."""
        return v if isinstance(v, np.ndarray) or hasattr(v, "device") else self.array(v)

    def where(self, c: Any, a: Any, b: Any) -> Any:
        if self.torch:
            import torch
            return torch.where(self.lift(c), self.lift(a), self.lift(b))
        return np.where(c, a, b)

    def extreme(self, func: str, a: Any, b: Any) -> Any:
        if self.torch:
            import torch
            return (torch.minimum if func == "min" else torch.maximum)(self.lift(a), self.lift(b))
        return (np.minimum if func == "min" else np.maximum)(a, b)

    def cast(self, x: Any, dtype: str) -> Any:
        if self.torch:
            import torch
            return self.lift(x).to(getattr(torch, dtype))
        return np.asarray(x).astype(dtype)


_ARITH = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
          "//": lambda a, b: a // b, "%": lambda a, b: a % b, "<": lambda a, b: a < b,
          "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
          "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def _value(e: Expr, env: dict[str, Any], arrays: dict[str, Any], xp: _Xp) -> Any:
    """``e`` for every instance at once (integer arrays that broadcast against each other)."""
    if isinstance(e, Const):
        return int(e.value)   # a Python number: it broadcasts against numpy arrays and torch tensors
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Access):
        subs = tuple(_value(s, env, arrays, xp) for s in e.index)
        return xp.cast(arrays[e.array][subs], "int64")
    if isinstance(e, Unary):
        return -_value(e.operand, env, arrays, xp)
    if isinstance(e, Cast):
        return xp.cast(_value(e.operand, env, arrays, xp), e.dtype)
    if isinstance(e, Binary) and e.op in _ARITH:
        return _ARITH[e.op](_value(e.lhs, env, arrays, xp), _value(e.rhs, env, arrays, xp))
    if isinstance(e, Call) and e.func == "where":
        c, a, b = (_value(x, env, arrays, xp) for x in e.args)
        return xp.where(c != 0, a, b)
    if isinstance(e, Call) and e.func in ("min", "max"):
        return xp.extreme(e.func, *(_value(x, env, arrays, xp) for x in e.args))
    if isinstance(e, Call) and e.func == "abs":
        return abs(_value(e.args[0], env, arrays, xp))
    raise IndexValueError(f"cannot compute the indirect subscript {expr_to_str(e)} before the call")


def _instances(st: Statement, used: list[str], program: Program,
               params: dict[str, int]) -> tuple[dict[str, np.ndarray], dict[str, tuple[int, int]] | None] | None:
    """The values of the iterators ``used`` over the statement's instances (``None``: no instance), and
    their ranges when the instances are a box (``None`` otherwise)."""
    dom = fix_params(st.domain.intersect_params(program.context), params)
    keep = [st.iterators.index(u) for u in used]
    for k in reversed(range(len(st.iterators))):
        if k not in keep:
            dom = dom.project_out(isl.dim_type.set, k, 1)
    if dom.is_empty():
        return None
    box = [(dom.dim_min_val(k).to_python(), dom.dim_max_val(k).to_python()) for k in range(len(used))]
    rect = isl.Set.universe(dom.get_space())
    for k, (lo, hi) in enumerate(box):
        rect = rect.lower_bound_val(isl.dim_type.set, k, lo).upper_bound_val(isl.dim_type.set, k, hi)
    if rect.intersect_params(dom.params()).is_subset(dom):
        return ({u: np.arange(lo, hi + 1, dtype=np.int64).reshape([-1 if j == k else 1 for j in range(len(used))])
                 for k, (u, (lo, hi)) in enumerate(zip(used, box))}, dict(zip(used, box)))
    points: list[list[int]] = []
    dom.foreach_point(lambda p: points.append([p.get_coordinate_val(isl.dim_type.set, k).to_python()
                                               for k in range(len(used))]))
    table = np.array(points, dtype=np.int64).reshape(-1, len(used))
    return {u: table[:, k].copy() for k, u in enumerate(used)}, None


def _wrapped(e: Expr, extent: int) -> Expr | None:
    """``x`` when ``e`` is ``where(x < 0, x + extent, x)`` (a negative index counted from the end, as the
    torch lowering writes it): ``e`` is then in range exactly when ``-extent <= x < extent``."""
    if isinstance(e, Call) and e.func == "where":
        c, a, b = e.args
        if (c == Binary("<", b, Const(0)) and a == Binary("+", b, Const(extent))):
            return b
    return None


def _block(e: Expr, box: dict[str, tuple[int, int]] | None) -> tuple[str, tuple[int | slice, ...]] | None:
    """For a subscript that is an element of an index array at iterators (each at most once) and
    constants, over a box of instances: the array and the block of it the subscript reads (a slice per
    iterator, the constants as they are); ``None`` for any other subscript."""
    if box is None or not isinstance(e, Access):
        return None
    block: list[int | slice] = []
    for x in e.index:
        if isinstance(x, Const) and isinstance(x.value, int):
            block.append(x.value)
        elif isinstance(x, Var) and x.kind == "iter" and x.name in box:
            lo, hi = box[x.name]
            block.append(slice(lo, hi + 1))
        else:
            return None
    names = [x.name for x in e.index if isinstance(x, Var)]
    return (e.array, tuple(block)) if len(names) == len(set(names)) else None


@dataclass(frozen=True)
class _Subscript:
    """One indirect subscript to check: dimension ``dim`` of ``access`` in ``statement``, whose
    instances (the iterators it uses, as broadcasting ``arange`` vectors or a point table) and array
    extent are fixed by the parameters."""

    statement: Statement
    access: Access
    dim: int
    instances: dict[str, np.ndarray]
    extent: int
    index_arrays: tuple[str, ...]
    """The index arrays the subscript reads."""
    block: tuple[str, tuple[int | slice, ...]] | None = None
    """When the subscript's values are a block of one index array (an ``embedding``'s token ids), or such
    a block wrapped (:func:`_wrapped`): that array and block, whose least and greatest values are the
    whole check (see :func:`_block`)."""
    low: int = 0
    """The least value the block may hold: ``-extent`` for a wrapped one."""


class IndexCheck:
    """The call-time check of ``program``'s indirect subscripts at fixed parameter values.

    Built once per parameter values (isl projects the domains and enumerates the instances), then
    called with each call's arrays: only the subscripts' values are computed then, with numpy or torch.
    """

    def __init__(self, program: Program, params: dict[str, int]):
        self.program = program
        self.params = dict(params)
        self.subscripts: list[_Subscript] = []
        seen: set[tuple[str, Access, int]] = set()
        blocks: set[tuple[Any, ...]] = set()
        for st in program.statements:
            for acc in st.reads:
                for d in indirect_dims(acc):
                    if (st.name, acc, d) in seen:
                        continue
                    if not seen:
                        check_index_arrays(program)   # once, where the program has an indirect subscript
                    seen.add((st.name, acc, d))
                    used = [it for it in st.iterators if it in var_names(acc.index[d], "iter")]
                    found = _instances(st, used, program, params)
                    if found is not None:
                        extent = evaluate(program.array(acc.array).shape[d], params)
                        names = tuple(dict.fromkeys(r.array for r in index_reads(acc)))
                        inner = _wrapped(acc.index[d], extent)
                        block = _block(acc.index[d] if inner is None else inner, found[1])
                        low = 0 if inner is None else -extent
                        if block is not None:  # the same block checked for the same range once
                            key = (block[0], tuple((b.start, b.stop) if isinstance(b, slice) else b for b in block[1]),
                                   low, extent)  # (slices are not hashable before Python 3.12)
                            if key in blocks:
                                continue
                            blocks.add(key)
                        self.subscripts.append(_Subscript(st, acc, d, found[0], extent, names, block, low))

    def __call__(self, arrays: dict[str, Any], scalars: dict[str, Any]) -> None:
        """Raise :class:`IndexValueError` when a subscript takes a value outside its dimension."""
        for sub in self.subscripts:
            _check_subscript(self.program, sub, self.params, arrays, scalars)

    def ranges(self, *, max_runs: int = 16) -> tuple[IndexRange, ...] | None:
        """The whole check as ranges of elements of index arrays (C-contiguous) that must lie in ranges of
        values, for code that runs it without Python (:mod:`polytri.cpu_codegen.graph_driver`); ``None``
        where a subscript is not a block of one index array (its values must be computed), an index array
        has a type without a code in :data:`RANGE_TYPES`, or a block takes more than ``max_runs`` runs."""
        out: list[IndexRange] = []
        for sub in self.subscripts:
            if sub.block is None:
                return None
            name, block = sub.block
            arr = self.program.array(name)
            if arr.dtype not in RANGE_TYPES:
                return None
            shape = tuple(evaluate(d, self.params) for d in arr.shape)
            runs = flat_runs(shape, block)
            if len(runs) > max_runs:
                return None
            out += [IndexRange(name, arr.dtype, start, count, sub.low, sub.extent) for start, count in runs]
        return tuple(out)


RANGE_TYPES = ("int64", "int32", "uint8", "int8")
"""Types of index arrays whose ranges compiled code checks (their codes are their positions)."""


@dataclass(frozen=True)
class IndexRange:
    """``count`` consecutive elements of index array ``array`` from element ``start`` (C order) each in
    ``[low, high)``."""

    array: str
    dtype: str
    start: int
    count: int
    low: int
    high: int


def flat_runs(shape: tuple[int, ...], block: tuple[int | slice, ...]) -> list[tuple[int, int]]:
    """The elements of the block ``block`` (an index or a slice of step one per dimension) of a C-contiguous
    array of ``shape``, as runs ``(first element, count)``: the innermost dimensions the block takes whole,
    and one more it takes a slice of, make one run; the dimensions before it are enumerated."""
    if not shape:
        return [(0, 1)]
    spans = [(b, b + 1) if isinstance(b, int) else (b.start or 0, shape[k] if b.stop is None else b.stop)
             for k, b in enumerate(block)]
    if any(hi <= lo for lo, hi in spans):
        return []
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * shape[k + 1]
    inner = len(shape)
    while inner > 0 and spans[inner - 1] == (0, shape[inner - 1]):
        inner -= 1
    if inner > 0:
        inner -= 1  # the dimension the run takes a slice of
    count = (spans[inner][1] - spans[inner][0]) * strides[inner]
    starts = [0]
    for k in range(inner + 1):
        lo, hi = spans[k] if k < inner else (spans[k][0], spans[k][0] + 1)
        starts = [s + i * strides[k] for s in starts for i in range(lo, hi)]
    return [(s, count) for s in starts]


def _check_subscript(program: Program, sub: _Subscript, params: dict[str, int], arrays: dict[str, Any],
                     scalars: dict[str, Any]) -> None:
    st, acc, d = sub.statement, sub.access, sub.dim
    if sub.block is not None:  # the least and greatest values of a block of the index array: one reduction
        values = arrays[sub.block[0]][sub.block[1]]
        low, high = (values.aminmax() if hasattr(values, "aminmax") else (values.min(), values.max()))
        if sub.low <= int(low) and int(high) < sub.extent:
            return
    xp = _Xp(arrays[sub.index_arrays[0]])
    env = {u: xp.array(v) for u, v in sub.instances.items()}
    env.update(params)
    env.update({s: int(v) for s, v in scalars.items() if np.issubdtype(type(v), np.integer)})
    values = xp.lift(_value(acc.index[d], env, arrays, xp))
    if 0 <= int(values.min()) and int(values.max()) < sub.extent:
        return
    bad = (values < 0) | (values >= sub.extent)
    first = int(values[bad].reshape(-1)[0])
    names = " and ".join(f"{a!r}" for a in sub.index_arrays)
    raise IndexValueError(
        f"{program.name}: statement {st.name} ({st.text()}) reads {expr_to_str(acc)}: index array {names} "
        f"holds a value that makes subscript {d} equal {first}, out of range for dimension {d} of array "
        f"{acc.array!r} (size {sub.extent}). Nothing was run")


def check_index_values(program: Program, params: dict[str, int], arrays: dict[str, Any],
                       scalars: dict[str, Any]) -> None:
    """Raise :class:`IndexValueError` when an indirect subscript of ``program`` takes a value outside
    its array dimension for these arguments (see the module's docstring; :class:`IndexCheck` keeps the
    work that depends only on the parameters, for repeated calls)."""
    if program.reads_indirectly:
        IndexCheck(program, params)(arrays, scalars)
