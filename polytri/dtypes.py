"""Element types and polytri's type promotion rules.

The rules follow numpy's NEP 50, which is also what PyTorch does for tensors and Python numbers:

* Types have a *kind*: ``bool`` < integer < floating.
* A value is *strong* (array element, scalar argument, cast) or *weak* (Python literal, loop iterator,
  parameter).  Weak values take the type of the strong operand when its kind is at least as high;
  a weak float meeting a strong integer or bool gives ``float64``; a weak int meeting a bool gives
  ``int64``.  Two weak operands give ``int64`` or ``float64``.
* Two strong operands of different kinds give the higher kind's type; of the same kind the wider type;
  ``float16`` with ``bfloat16`` gives ``float32`` (neither holds the other), and ``int8`` with ``uint8``
  gives ``int32`` (PyTorch and numpy give ``int16``, which polytri lacks; ``int32`` holds the same values).
* ``uint8`` is the one unsigned type: arithmetic on it wraps modulo 256, as the conversions to it do.
* Arithmetic on two bools (``+ - * // % **``) is done in ``int64``, as in Python.
* ``/`` of integers or bools is ``float64``; ``exp log sqrt tanh sigmoid erf`` of integers or bools
  are ``float64``; comparisons are ``bool``.

Every operation converts both operands to the result type before computing, on every backend.
Operations on 16-bit floats round to the 16-bit type after each operation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import TypeCheckError


@dataclass(frozen=True, slots=True)
class DType:
    """An element type."""

    name: str
    """Canonical name, e.g. ``float32``."""
    kind: str
    """``"b"`` (bool), ``"i"`` (signed integer) or ``"f"`` (floating)."""
    bits: int
    """Storage width in bits."""
    c_type: str
    """C type used for storage."""
    c_compute: str
    """C type arithmetic is done in (``float`` for the 16-bit floats, else the storage type)."""

    @property
    def itemsize(self) -> int:
        return self.bits // 8

    @property
    def rank(self) -> int:
        return {"b": 0, "i": 1, "f": 2}[self.kind]

    def __str__(self) -> str:
        return self.name


BOOL = DType("bool", "b", 8, "bool", "bool")
INT8 = DType("int8", "i", 8, "int8_t", "int8_t")
UINT8 = DType("uint8", "i", 8, "uint8_t", "uint8_t")
INT32 = DType("int32", "i", 32, "int32_t", "int32_t")
INT64 = DType("int64", "i", 64, "int64_t", "int64_t")
FLOAT16 = DType("float16", "f", 16, "_Float16", "float")
BFLOAT16 = DType("bfloat16", "f", 16, "uint16_t", "float")
FLOAT32 = DType("float32", "f", 32, "float", "float")
FLOAT64 = DType("float64", "f", 64, "double", "double")

ALL: dict[str, DType] = {d.name: d for d in (BOOL, INT8, UINT8, INT32, INT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64)}
ALIASES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "i8": "int8", "u8": "uint8",
           "i32": "int32", "i64": "int64", "half": "float16", "float": "float32", "double": "float64"}


def dtype(name: str | DType) -> DType:
    """Look up a dtype by canonical name or alias; raise :class:`TypeCheckError` naming it otherwise."""
    if isinstance(name, DType):
        return name
    key = ALIASES.get(str(name), str(name))
    if key.startswith("torch."):
        key = key[len("torch."):]
    if key not in ALL:
        raise TypeCheckError(f"unknown dtype {name!r}; known: {', '.join(ALL)}")
    return ALL[key]


def numpy_dtype(d: DType) -> np.dtype:
    """The numpy dtype used to hold ``d`` (bfloat16 has none: its bits are held as uint16)."""
    if d is BFLOAT16:
        return np.dtype(np.uint16)
    return np.dtype(d.name)


_OF_ELEMENT_TYPE: dict[object, DType] = {}
""":func:`of_array`'s answers by the array's dtype object (its name costs microseconds a call)."""


def of_array(arr: object) -> DType:
    """The polytri dtype of a numpy array or torch tensor."""
    dt = getattr(arr, "dtype", None)
    known = _OF_ELEMENT_TYPE.get(dt)
    if known is not None:
        return known
    name = str(dt)
    if name.startswith("torch."):
        name = name[len("torch."):]
    if name not in ALL:
        raise TypeCheckError(f"unsupported element type {dt}; polytri supports {', '.join(ALL)}")
    _OF_ELEMENT_TYPE[dt] = ALL[name]
    return ALL[name]


@dataclass(frozen=True, slots=True)
class VType:
    """The type of a value in an expression: a dtype and whether it is weak (see module docstring)."""

    dtype: DType
    weak: bool = False


def promote(a: VType, b: VType) -> VType:
    """Result type of combining two operands (NEP 50 rules, see module docstring)."""
    if a.weak and b.weak:
        return VType(FLOAT64 if "f" in (a.dtype.kind, b.dtype.kind) else INT64, True)
    if a.weak or b.weak:
        weak, strong = (a, b) if a.weak else (b, a)
        if weak.dtype.rank <= strong.dtype.rank:
            return VType(strong.dtype)
        return VType(FLOAT64 if weak.dtype.kind == "f" else INT64)
    x, y = a.dtype, b.dtype
    if x == y:
        return VType(x)
    if x.rank != y.rank:
        return VType(x if x.rank > y.rank else y)
    if {x, y} == {FLOAT16, BFLOAT16}:
        return VType(FLOAT32)
    if {x, y} == {INT8, UINT8}:
        return VType(INT32)
    return VType(x if x.bits > y.bits else y)


def arith(a: VType, b: VType) -> VType:
    """Result of ``+ - * // % **``: the promoted type, with bool arithmetic done in int64."""
    r = promote(a, b)
    if r.dtype is BOOL:
        return VType(INT64, r.weak)
    return r


def true_div(a: VType, b: VType) -> VType:
    """Result of ``/``: floating always."""
    r = promote(a, b)
    if r.dtype.kind != "f":
        return VType(FLOAT64, r.weak)
    return r


def floating(a: VType) -> VType:
    """Result of a transcendental function of ``a``."""
    return a if a.dtype.kind == "f" else VType(FLOAT64, a.weak)
