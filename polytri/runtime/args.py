"""Binding call arguments to a program: arrays, scalars and parameters, checked before anything runs.

Both the reference interpreter and compiled kernels call :func:`bind`; nothing touches the user's
arrays until every check has passed.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes
from ..errors import ArgumentError, TypeCheckError
from ..ir.affine import evaluate, linear
from ..ir.expr import Expr
from ..ir.islutil import fix_params
from ..ir.printer import expr_to_str
from ..ir.program import Program
from ..ir.verify import check_call_bounds
from ..numerics import CASTS
from .index_check import check_index_values


@dataclass(frozen=True)
class Bound:
    """Arguments of one call, validated."""

    params: dict[str, int]
    """Every parameter's value (given or inferred from shapes)."""
    arrays: dict[str, Any]
    """The user's array objects (numpy arrays or torch tensors), by declared name."""
    scalars: dict[str, Any]
    """Scalar values converted to their declared dtype (numpy scalars)."""
    pointers: dict[str, int] = field(default_factory=dict)
    """The data pointers read while checking the call, of the arrays that are C-contiguous numpy arrays
    (reading one costs about a microsecond: a caller reuses them)."""


def is_torch_tensor(x: object) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _shape(x: Any) -> tuple[int, ...]:
    shape = x.shape
    return shape if type(shape) is tuple else tuple(int(s) for s in shape)  # numpy's: ints already


# numpy 2 moved byte_bounds (its old name answers through a slow module __getattr__): looked up once
_byte_bounds = vars(np).get("byte_bounds") or np.lib.array_utils.byte_bounds


def _memory_range(x: Any) -> tuple[int, int] | None:
    """[start, end) of the bytes an array may touch (None for empty arrays)."""
    if 0 in _shape(x):
        return None
    if is_torch_tensor(x):
        start = x.data_ptr()
        span = sum((s - 1) * st for s, st in zip(x.shape, x.stride())) + 1
        return start, start + span * x.element_size()
    lo, hi = _byte_bounds(x)
    return lo, hi


def _device(x: Any) -> str:
    """``"cpu"`` for numpy arrays, the tensor's device (``"cuda:0"``...) for torch tensors."""
    return str(x.device) if is_torch_tensor(x) else "cpu"


def _check_devices(program: Program, arrays: dict[str, Any], device: str) -> None:
    """The cpu target takes CPU data only; a GPU target takes arrays that all live on one device (CPU
    tensors run in Triton's interpreter)."""
    if device == "cpu":
        for name, value in arrays.items():
            if _device(value) != "cpu":
                raise ArgumentError(f"{program.name}: array {name!r} is on {_device(value)}; the cpu target "
                                    f"needs numpy arrays or CPU tensors (move it with .cpu())")
        return
    names = list(arrays)
    for name in names[1:]:
        if _device(arrays[name]) != _device(arrays[names[0]]):
            raise ArgumentError(f"{program.name}: array {name!r} is on {_device(arrays[name])} but array "
                                f"{names[0]!r} is on {_device(arrays[names[0]])}; all arrays of a call must be "
                                f"on one device")


def _check_strides(program: Program, name: str, value: Any) -> None:
    """Reject layouts in which two elements may share memory (broadcasts, ``as_strided`` overlaps).

    The test is the usual sufficient one: with the dimensions sorted by stride, each stride reaches past
    the span of the smaller ones.  Other layouts (negative strides, transposes, slices) are accepted and
    copied in and out by the backends."""
    if any(n == 0 for n in value.shape):
        return
    if is_torch_tensor(value):
        strides, unit = tuple(value.stride()), 1
    else:
        strides, unit = value.strides, value.itemsize
    dims = sorted((abs(st), n) for st, n in zip(strides, value.shape) if n > 1)
    if any(st == 0 for st, _ in dims):
        raise ArgumentError(f"{program.name}: array {name!r} has a dimension of stride 0 (a broadcast or "
                            f"expanded view, several elements in one place); pass a copy")
    span = unit
    for st, n in dims:
        if st < span:
            raise ArgumentError(f"{program.name}: array {name!r} has strides {tuple(strides)} for shape "
                                f"{tuple(value.shape)}: its elements may overlap in memory; pass a copy")
        span = st * (n - 1) + span


def _check_array_object(program: Program, name: str, value: Any, rank: int) -> None:
    """A numpy array (not masked, native byte order) or a torch tensor, of the declared rank."""
    if not (isinstance(value, np.ndarray) or is_torch_tensor(value)):
        raise ArgumentError(f"{program.name}: argument {name!r} must be a numpy array or a torch tensor, "
                            f"got {type(value).__name__}")
    if isinstance(value, np.ma.MaskedArray):
        raise ArgumentError(f"{program.name}: array {name!r} is a masked array; polytri would ignore its "
                            f"mask: pass its .data or .filled() values")
    if len(value.shape) != rank:
        raise ArgumentError(f"{program.name}: array {name!r} is declared with rank {rank} but the argument "
                            f"has shape {tuple(value.shape)}")
    if isinstance(value, np.ndarray) and value.dtype.byteorder not in "=|":
        raise ArgumentError(f"{program.name}: array {name!r} has non-native byte order ({value.dtype.str}); "
                            f"pass x.astype(x.dtype.newbyteorder('='))")


def _check_array_dtype(program: Program, name: str, value: Any, declared: str) -> None:
    """The array's element type is the declared one."""
    try:
        got = dtypes.of_array(value)
    except TypeCheckError as exc:
        raise ArgumentError(f"{program.name}: array {name!r} is declared {declared}, but: {exc}") from None
    if got.name != declared:
        raise ArgumentError(f"{program.name}: array {name!r} is declared {declared} but the argument is {got.name}")


def _check_numpy_memory(program: Program, name: str, value: np.ndarray) -> None:
    """A numpy array must be writeable (polytri runs in place) and aligned."""
    if not value.flags.writeable:
        raise ArgumentError(f"{program.name}: array {name!r} is read-only; polytri runs in place")
    if not value.flags.aligned:
        raise ArgumentError(f"{program.name}: array {name!r} is not aligned to its element size; pass a "
                            f"copy (np.array(x))")


def _check_torch_layout(program: Program, name: str, value: Any) -> None:
    """A tensor must be dense (strided) and not a lazily negated or conjugated view."""
    import torch
    if value.layout != torch.strided:
        raise ArgumentError(f"{program.name}: array {name!r} has layout {value.layout}; polytri needs a "
                            f"dense (torch.strided) tensor: pass x.to_dense()")
    if value.is_neg() or value.is_conj():
        raise ArgumentError(f"{program.name}: array {name!r} is a lazily negated or conjugated view; "
                            f"pass x.resolve_neg() / x.resolve_conj()")


def _check_array(program: Program, name: str, value: Any) -> None:
    """Every check of one array argument against its declaration, in a fixed order."""
    arr = program.array(name)
    _check_array_object(program, name, value, arr.rank)
    _check_array_dtype(program, name, value, arr.dtype)
    if isinstance(value, np.ndarray):
        _check_numpy_memory(program, name, value)
    else:
        _check_torch_layout(program, name, value)
    _check_strides(program, name, value)


#: One declared extent: array name, dimension, extent expression, and its linear form (``None`` when it
#: has none).
_Equation = tuple[str, int, Expr, "tuple[dict[str, int], int] | None"]


def _equations(program: Program) -> list[_Equation]:
    """The declared extents of ``program``'s arrays, computed once per program."""
    return program._memo("extent_equations", lambda: [(arr.name, d, e, linear(e)) for arr in program.arrays
                                                      for d, e in enumerate(arr.shape)])


def _solve_one(equation: _Equation, known: dict[str, int], arrays: dict[str, Any]) -> tuple[str, int] | None:
    """``(param, value)`` when the equation is linear with exactly one unknown parameter and the array's
    extent gives it an integer value."""
    name, d, _, form = equation
    if form is None:
        return None
    coeffs, const = form
    unknown = [p for p in coeffs if p not in known]
    if len(unknown) != 1:
        return None
    p = unknown[0]
    rest = const + sum(c * known[q] for q, c in coeffs.items() if q != p)
    actual = _shape(arrays[name])[d]
    if (actual - rest) % coeffs[p] != 0:
        return None
    return p, (actual - rest) // coeffs[p]


def _solve(equations: list[_Equation], known: dict[str, int], arrays: dict[str, Any]) -> None:
    """Add to ``known`` every parameter the equations determine, sweeping until nothing changes."""
    changed = True
    while changed:
        changed = False
        for equation in equations:
            solved = _solve_one(equation, known, arrays)
            if solved is not None:
                known[solved[0]] = solved[1]
                changed = True


def _check_known_params(program: Program, given: dict[str, int], known: dict[str, int]) -> None:
    """Every parameter has a value, and none is negative."""
    missing = [p for p in program.params if p not in known]
    if missing:
        raise ArgumentError(f"{program.name}: cannot infer parameter(s) {', '.join(missing)} from the array "
                            f"shapes; pass them explicitly, e.g. {missing[0]}=...")
    for p in program.params:
        if known[p] < 0:
            how = "" if p in given else " (inferred from the array shapes)"
            raise ArgumentError(f"{program.name}: parameter {p!r} = {known[p]}{how} is negative; parameters "
                                f"are sizes")


def _check_extents(program: Program, equations: list[_Equation], known: dict[str, int],
                   arrays: dict[str, Any]) -> None:
    """Every array extent equals its declared extent for the parameter values."""
    for name, d, e, _ in equations:
        want = evaluate(e, known)
        got = _shape(arrays[name])[d]
        if want != got:
            raise ArgumentError(f"{program.name}: array {name!r} has extent {got} in dimension {d}, but its "
                                f"declared extent {expr_to_str(e)} is {want} with "
                                f"{', '.join(f'{k}={v}' for k, v in known.items())}")


def _infer_params(program: Program, given: dict[str, int], arrays: dict[str, Any]) -> dict[str, int]:
    """The given parameters plus those the array shapes determine; every extent checked."""
    known = dict(given)
    equations = _equations(program)
    _solve(equations, known, arrays)
    _check_known_params(program, given, known)
    _check_extents(program, equations, known, arrays)
    return known


def _check_context(program: Program, params: dict[str, int]) -> None:
    # parameter values that met the assumptions before, remembered per program (an isl operation a call)
    passed: set[tuple[tuple[str, int], ...]] = program._memo("context_passed", set)
    key = tuple(sorted(params.items()))
    if key in passed:
        return
    if fix_params(program.context, params).is_empty():
        raise ArgumentError(f"{program.name}: parameters {params} violate the program's assumptions "
                            f"{program.context}")
    if len(passed) >= 256:  # many sizes: keep the memo small
        passed.clear()
    passed.add(key)


def _convert_scalar(program: Program, name: str, value: Any) -> Any:
    dt = dtypes.dtype(program.scalar(name).dtype)
    if (is_torch_tensor(value) or isinstance(value, np.ndarray)) and value.ndim == 0:
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) and dt.kind != "b":
        raise ArgumentError(f"{program.name}: scalar {name!r} is {dt.name}, got a bool")
    if not isinstance(value, numbers.Real):
        raise ArgumentError(f"{program.name}: scalar {name!r} must be a real number, got {type(value).__name__}")
    number: Any = value
    if dt.kind in ("i", "b") and not isinstance(value, numbers.Integral):
        raise ArgumentError(f"{program.name}: scalar {name!r} is {dt.name}, got {value!r}")
    if dt.kind == "i":
        info = np.iinfo(dtypes.numpy_dtype(dt))
        if not info.min <= int(number) <= info.max:
            raise ArgumentError(f"{program.name}: scalar {name!r} is {dt.name}; {value!r} is out of its range "
                                f"[{info.min}, {info.max}]")
    if dt.kind == "f":
        if dt.bits == 16:
            return CASTS[dt.name](number)
        return np.float32(number) if dt.bits == 32 else np.float64(number)
    return dtypes.numpy_dtype(dt).type(number)


def _check_names(program: Program, kwargs: dict[str, Any]) -> None:
    """No unknown keyword, and every array and scalar given (parameters may be inferred)."""
    expected = [a.name for a in program.arrays] + [s.name for s in program.scalars] + list(program.params)
    unknown = [k for k in kwargs if k not in expected]
    if unknown:
        raise ArgumentError(f"{program.name}: unknown argument(s) {', '.join(unknown)}; expected {', '.join(expected)}")
    missing = [a.name for a in program.arrays if a.name not in kwargs]
    missing += [s.name for s in program.scalars if s.name not in kwargs]
    if missing:
        raise ArgumentError(f"{program.name}: missing argument(s) {', '.join(missing)}")


def _param_value(program: Program, p: str, v: Any) -> int:
    """A given parameter as a Python int that fits in 64 bits (numpy integers accepted, bools not)."""
    if isinstance(v, np.integer):
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ArgumentError(f"{program.name}: parameter {p!r} must be an int, got {v!r}")
    if not -(2**63) <= v < 2**63:
        raise ArgumentError(f"{program.name}: parameter {p!r} = {v} does not fit in 64 bits")
    return v


def _contiguous_pointer(x: Any) -> int | None:
    """The data pointer of a non-empty C-contiguous numpy array (its bytes start there and run
    ``nbytes``), ``None`` for anything else."""
    return x.ctypes.data if type(x) is np.ndarray and x.flags.c_contiguous and x.size else None


def _check_overlaps(program: Program, arrays: dict[str, Any]) -> dict[str, int]:
    """No two arrays share memory; the data pointers read on the way (:attr:`Bound.pointers`).  A
    contiguous array's range is its pointer and size: ``byte_bounds`` takes twice as long."""
    pointers: dict[str, int] = {}
    ranges: list[tuple[str, tuple[int, int] | None]] = []
    for n, v in arrays.items():
        p = _contiguous_pointer(v)
        if p is None:
            ranges.append((n, _memory_range(v)))
        else:
            pointers[n] = p
            ranges.append((n, (p, p + v.nbytes)))
    for i, (n1, r1) in enumerate(ranges):
        for n2, r2 in ranges[i + 1:]:
            if r1 and r2 and r1[0] < r2[1] and r2[0] < r1[1]:
                raise ArgumentError(f"{program.name}: arrays {n1!r} and {n2!r} overlap in memory; "
                                    f"polytri requires distinct arrays")
    return pointers


#: Layouts of calls that passed every check that depends on the layout alone, remembered per program.
LAYOUTS_KEPT = 64


def _layout(program: Program, kwargs: dict[str, Any], device: str) -> tuple[Any, ...] | None:
    """What every check of a call but the overlaps, the scalars and the index values depends on: the
    names passed, each array's type, dtype (byte order included), shape, strides and memory flags, the given
    parameters (their types too) and the device; ``None`` where a call does not qualify (an array that
    is not exactly a numpy ndarray: a tensor, a subclass, a masked array)."""
    layout: list[Any] = [device, tuple(sorted(kwargs))]
    for a in program.arrays:
        v = kwargs.get(a.name)
        if type(v) is not np.ndarray:
            return None
        layout.append((v.dtype, v.shape, v.strides, v.flags.writeable, v.flags.aligned))
    for p in program.params:
        if p in kwargs:
            v = kwargs[p]
            if not isinstance(v, (int, np.integer)):
                return None  # the checks say what is wrong with it
            layout.append((p, type(v), v))
    return tuple(layout)


def _checked_params(program: Program, kwargs: dict[str, Any], arrays: dict[str, Any], device: str) -> dict[str, int]:
    """The parameters of a call, after every check that depends on the layout of its arguments alone;
    the checks are skipped for a layout that passed them before (:func:`_layout`)."""
    layout = _layout(program, kwargs, device)
    known: dict[tuple[Any, ...], dict[str, int]] = program._memo("call_layouts", dict)
    if layout is not None and layout in known:
        return known[layout]
    _check_names(program, kwargs)
    for name, value in arrays.items():
        _check_array(program, name, value)
    _check_devices(program, arrays, device)
    given = {p: _param_value(program, p, kwargs[p]) for p in program.params if p in kwargs}
    params = _infer_params(program, given, arrays)
    _check_context(program, params)
    check_call_bounds(program, params)
    if layout is not None:
        if len(known) >= LAYOUTS_KEPT:
            known.clear()
        known[layout] = params
    return params


def bind(program: Program, kwargs: dict[str, Any], *, device: str = "cpu") -> Bound:
    """Check the keyword arguments of a call and return them bound; raise :class:`ArgumentError`.  The
    checks that depend on the arguments' layout alone run once per layout (:func:`_checked_params`)."""
    arrays = {a.name: kwargs.get(a.name) for a in program.arrays}
    params = _checked_params(program, kwargs, arrays, device)
    pointers = _check_overlaps(program, arrays)
    scalars = {s.name: _convert_scalar(program, s.name, kwargs[s.name]) for s in program.scalars}
    check_index_values(program, params, arrays, scalars)
    return Bound({p: params[p] for p in program.params}, arrays, scalars, pointers)
