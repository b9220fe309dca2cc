"""Type annotations of ``@pt.kernel`` arguments: ``pt.f64["N", "N"]``, ``pt.f32["N"]``, ...

Each element type is an :class:`ArrayType`; subscripting it with a shape gives an :class:`ArraySpec`,
the annotation of an array argument.  Shape entries are ints, parameter names or affine strings in the
parameters (``"N + 1"``); one entry (``pt.f64["N"]``) means a 1-D array.  An :class:`ArrayType` used
without a subscript (``alpha: pt.f32``) annotates a run-time scalar of that type.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..errors import ProgramError

ShapeEntry = int | str


@dataclass(frozen=True, slots=True)
class ArraySpec:
    """The annotation of an array argument: element type and shape."""

    dtype: str
    """Canonical polytri dtype name (``float64``, ``bfloat16``, ...)."""
    shape: tuple[ShapeEntry, ...]
    """One entry per dimension: an int, a parameter name or an affine string in the parameters."""

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        short = _SHORT.get(self.dtype, self.dtype)
        return f"pt.{short}[{', '.join(repr(s) for s in self.shape)}]"


class ArrayType:
    """An element type usable in annotations: ``f64["N", "M"]`` for arrays, bare ``f64`` for scalars."""

    __slots__ = ("dtype",)

    dtype: str
    """Canonical polytri dtype name."""

    def __init__(self, dtype: str):
        self.dtype = dtypes.dtype(dtype).name

    def __getitem__(self, shape: object) -> ArraySpec:
        entries = shape if isinstance(shape, tuple) else (shape,)
        if len(entries) == 0:
            raise ProgramError(f"{self!r}[()]: arrays need at least one dimension")
        checked: list[ShapeEntry] = []
        for d, entry in enumerate(entries):
            if isinstance(entry, bool) or not isinstance(entry, (int, str)):
                raise ProgramError(f"{self!r}[...]: dimension {d} of the shape must be an int, a parameter name or "
                                   f"an affine string like \"N + 1\", got {entry!r}")
            if isinstance(entry, int) and entry < 0:
                raise ProgramError(f"{self!r}[...]: dimension {d} has negative extent {entry}")
            if isinstance(entry, str) and not entry.strip():
                raise ProgramError(f"{self!r}[...]: dimension {d} of the shape is an empty string")
            checked.append(entry.strip() if isinstance(entry, str) else entry)
        return ArraySpec(self.dtype, tuple(checked))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArrayType) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("ArrayType", self.dtype))

    def __str__(self) -> str:  # lets ``dtypes.dtype(pt.f32)`` and ``p.array(..., pt.f32)`` work
        return self.dtype

    def __repr__(self) -> str:
        return f"pt.{_SHORT.get(self.dtype, self.dtype)}"


_SHORT = {"float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16", "int8": "i8",
          "uint8": "u8", "int32": "i32", "int64": "i64", "bool": "bool_"}

f64 = ArrayType("float64")
f32 = ArrayType("float32")
f16 = ArrayType("float16")
bf16 = ArrayType("bfloat16")
i8 = ArrayType("int8")
u8 = ArrayType("uint8")
i32 = ArrayType("int32")
i64 = ArrayType("int64")
bool_ = ArrayType("bool")

__all__ = ["ArraySpec", "ArrayType", "bf16", "bool_", "f16", "f32", "f64", "i8", "i32", "i64", "u8"]
